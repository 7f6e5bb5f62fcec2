"""Generated stand-ins for the data the studies read, for a first run without traces.

``ilucid study mixed``, ``hetero`` and ``fragmentation`` read folders a new user does
not have (an inference instance list, Gavel's per-type throughputs, Alibaba's pod and
node lists). Without them each study runs on the data drawn here, seeded, and says so.
The shapes are plausible, not measured: they let the study's code run end to end, and
are no evidence about any real cluster (as :mod:`ilucid.traces.synthetic`).
"""

from __future__ import annotations

import csv
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ilucid.studies.gavel_world import GavelWorld
from ilucid.traces import InferenceTrace
from ilucid.traces.csv_cells import formula_safe
from ilucid.traces.inference import InferenceInstance

__all__ = [
    "GENERATED_NODES_FILE",
    "GENERATED_PODS_FILE",
    "generated_inference",
    "generated_type_world",
    "write_generated_share",
]

_DAY_S = 86400.0

#: the file names :func:`write_generated_share` writes, in the Alibaba v2023 layout
GENERATED_PODS_FILE = "openb_pod_list_generated.csv"
GENERATED_NODES_FILE = "openb_node_list_gpu_node.csv"


def generated_inference(
    services: int = 200, window_days: float = 7.0, seed: int = 0
) -> InferenceTrace:
    """``services`` one-GPU inference instances over a ``window_days`` window.

    A third are up for the whole window (as the DLRM trace's long-lived services);
    the rest start at a uniform time and live a log-normal time (median 6 h).
    """
    if services < 1:
        raise ValueError(f"services must be at least 1, got {services}")
    rng = random.Random(seed)
    window = window_days * _DAY_S
    instances = []
    for index in range(services):
        name = f"gen-inf-{index:04d}"
        app = f"app-{index % 12}"
        if rng.random() < 1 / 3:
            instances.append(InferenceInstance(name, app, 1, None, None))
            continue
        start = float(int(rng.uniform(0.0, window)))
        life = rng.lognormvariate(0.0, 1.0) * 6 * 3600.0
        end = start + life
        instances.append(InferenceInstance(name, app, 1, start, end if end < window else None))
    source = f"generated inference(services={services}, seed={seed}, {window_days:g} days)"
    return InferenceTrace(tuple(instances), window, source, Counter())


#: Gavel-style workloads (name, GPUs) the generated world measures on every type
_WORKLOADS = [
    (f"{model} (batch size {batch})", scale)
    for model in ("ResNet-18", "ResNet-50", "Transformer", "LM", "Recommendation", "A3C")
    for batch in (16, 64)
    for scale in (1, 2, 4, 8)
]


def generated_type_world(types: Sequence[str], seed: int = 0) -> tuple[GavelWorld, str]:
    """A :class:`GavelWorld` of generated throughputs for ``types`` (the first is the
    reference, speed 1), and a line saying how they were drawn.

    Each next type runs a workload at about half the speed of the one before; the ratio
    varies by workload (``0.5 ** (i * U(0.5, 1.5))`` for the i-th type), so jobs gain
    differently from a fast type, as in Gavel's measurements.
    """
    names = list(dict.fromkeys(t.strip().lower() for t in types if t.strip()))
    if not names:
        raise ValueError("name at least one GPU type")
    rng = random.Random(seed)
    table: dict[str, dict[str, float]] = {name: {} for name in names}
    for model, scale in _WORKLOADS:
        key = repr((model, scale))
        reference = rng.uniform(1.0, 20.0)
        for index, name in enumerate(names):
            table[name][key] = reference * 0.5 ** (index * rng.uniform(0.5, 1.5))
    how = (
        f"generated per-type speeds(types={','.join(names)}, seed={seed}): each type about"
        " half as fast as the one before it, varying by workload"
    )
    return GavelWorld(table, names[0], seed), how


#: (share of pods, GPUs, GPU share in thousandths; None: a fraction drawn per pod)
_POD_MIX = ((0.55, 1, None), (0.30, 1, 1000), (0.10, 2, 1000), (0.04, 4, 1000), (0.01, 8, 1000))
_FRACTIONS = (100, 200, 250, 300, 500, 700)
_MODELS = ("V100M16", "T4", "A10")


def write_generated_share(
    folder: Path, nodes: int = 24, pods: int = 800, seed: int = 0
) -> tuple[Path, Path, str]:
    """Write a pod list and a GPU node list in the Alibaba v2023 layout into ``folder``;
    return their paths and a line saying what they hold.

    Nodes of 8 GPUs (every fourth has 4), of three models in turn; pods mostly ask for a
    share of one GPU or one whole GPU, a few for 2, 4 or 8, and one in ten only accepts
    one GPU model (as the trace's ``gpu_spec``).
    """
    if nodes < 1 or pods < 1:
        raise ValueError(f"need at least one node and one pod, got {nodes} and {pods}")
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    nodes_path = folder / GENERATED_NODES_FILE
    with nodes_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(formula_safe(["sn", "cpu_milli", "memory_mib", "gpu", "model"]))
        for index in range(nodes):
            gpus = 4 if index % 4 == 3 else 8
            model = _MODELS[index % len(_MODELS)]
            writer.writerow(formula_safe([f"gen-node-{index:03d}", 96000, 393216, gpus, model]))
    pods_path = folder / GENERATED_PODS_FILE
    shares = [share for share, _, _ in _POD_MIX]
    with pods_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            formula_safe(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"])
        )
        for index in range(pods):
            _, gpus, milli = rng.choices(_POD_MIX, shares)[0]
            milli = milli if milli is not None else rng.choice(_FRACTIONS)
            cpu = rng.choice((1000, 2000, 4000, 8000)) * gpus
            memory = rng.choice((4096, 8192, 16384, 32768)) * gpus
            spec = rng.choice(_MODELS) if rng.random() < 0.1 else ""
            writer.writerow(formula_safe([f"gen-pod-{index:05d}", cpu, memory, gpus, milli, spec]))
    how = f"generated pods and nodes(pods={pods}, nodes={nodes}, seed={seed}) written to {folder}"
    return pods_path, nodes_path, how
