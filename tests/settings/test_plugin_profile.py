"""Profile files that list their plugins: found, checked by the plugin, errors at the line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ilucid.core.policies import PROFILES, make_policy
from ilucid.core.policies.in_order import InOrderPlan
from ilucid.core.policies.router import InferenceRouter
from ilucid.settings.profile_file import ProfileFileError, load_profile, resolve_policy

HEAD = '[profile]\nname = "listed"\n'
ORDER = '[[plugin]]\nphase = "queue_order"\nname = "fifo"\n'
PLAN = '[[plugin]]\nphase = "plan"\nname = "in-order"\n'
SITE_MODULE = """
from ilucid.core import Phase, PluginBase, plugin

@plugin("test-newest-first", Phase.QUEUE_ORDER)
class NewestFirst(PluginBase):
    def __init__(self, args):
        self.name = "test-newest-first"
    def key(self, job, now):
        return -job.spec.submit_time
    def describe(self, job, now):
        return "newest first"
"""


@pytest.fixture(autouse=True)
def _registry() -> Iterator[None]:
    profiles = dict(PROFILES)
    yield
    PROFILES.clear()
    PROFILES.update(profiles)


def _load(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "listed.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_listed_profile_builds_its_plugins(tmp_path: Path) -> None:
    inference = '[[plugin]]\nphase = "inference"\nname = "inference-first"\n'
    name = resolve_policy(str(_load(tmp_path, HEAD + inference + ORDER + PLAN)))
    policy = make_policy(name)
    assert isinstance(policy, InferenceRouter) and isinstance(policy.training, InOrderPlan)
    assert policy.training.order.name == "fifo"


def test_a_class_by_import_path_beside_the_file(tmp_path: Path) -> None:
    (tmp_path / "site_orders.py").write_text(SITE_MODULE)
    order = '[[plugin]]\nphase = "queue_order"\nuse = "site_orders:NewestFirst"\n'
    profile = load_profile(_load(tmp_path, HEAD + order + PLAN))
    assert [r.name for r in profile.plugins] == ["test-newest-first", "in-order"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            HEAD + ORDER.replace('"fifo"', '"fifoo"') + PLAN,
            ":5: plugin[1].name: no plugin named 'fifoo'; did you mean fifo",
        ),
        (
            HEAD + ORDER.replace("queue_order", "admission") + PLAN,
            ":4: plugin[1].phase: 'fifo' acts at queue_order, not admission",
        ),
        (HEAD + ORDER, ':1: plugin: needs exactly one plugin with phase = "plan", has 0'),
        (
            HEAD + PLAN.replace('"in-order"', '"replan"\nargs = { interval_s = -1 }') + ORDER,
            ":6: plugin[1].args.interval_s: must be >= 0, got -1",
        ),
        (
            HEAD + PLAN.replace('"in-order"', '"replan"\nargs = { intervals = 5 }') + ORDER,
            ":6: plugin[1].args.intervals: unknown argument; did you mean 'interval_s'?",
        ),
        (
            HEAD + '[[plugin]]\nphase = "queue_order"\nuse = "no_such_module:X"\n' + PLAN,
            ":5: plugin[1].use: no_such_module:X cannot be loaded: ModuleNotFoundError",
        ),
    ],
)
def test_errors_name_the_file_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = _load(tmp_path, text)
    with pytest.raises(ProfileFileError) as caught:
        load_profile(path)
    assert str(caught.value).startswith(f"{path}{expected}")


def test_a_plan_that_cannot_use_its_parts_is_refused_before_any_replay(tmp_path: Path) -> None:
    packing = '[[plugin]]\nphase = "packing"\nname = "indolent"\n'
    path = _load(tmp_path, HEAD + ORDER + packing + PLAN)
    with pytest.raises(ProfileFileError, match="the in-order plan calls no packing plugin"):
        resolve_policy(str(path))
