"""Packing analyzer: a shallow decision tree giving each job a sharing score.

Score 0 (light), 1 (medium) or 2 (heavy) from profiled GPU utilisation, memory
controller utilisation, GPU memory, mixed precision and batch size. Two jobs
may share GPUs only when their scores sum to at most 2. A depth-3 tree prints
as a handful of rules an operator can read and overrule.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ilucid.estimators.profiles import WorkloadProfile

__all__ = ["PACKING_FEATURES", "PackingAnalyzer"]

PACKING_FEATURES: tuple[str, ...] = ("gpu_util", "gmem_util", "gmem_gb", "amp", "batch_size")


class PackingAnalyzer:
    """Fit on labelled profiles; predict, explain a decision path, print rules."""

    name = "packing-tree"

    def __init__(self, max_depth: int = 3, seed: int = 0) -> None:
        self.max_depth = max_depth
        self.seed = seed
        self.model: Any = None
        self.trained_on = ""

    def fit(self, profiles: Sequence[WorkloadProfile], source: str) -> None:
        from sklearn.tree import DecisionTreeClassifier

        if not profiles:
            raise ValueError("no labelled profiles to train the packing analyzer on")
        self.model = DecisionTreeClassifier(
            max_depth=self.max_depth, min_samples_leaf=3, random_state=self.seed
        )
        self.model.fit(
            [[p.features()[f] for f in PACKING_FEATURES] for p in profiles],
            [p.label for p in profiles],
        )
        self.trained_on = source

    @property
    def training_rows(self) -> int:
        """How many profiles the tree was fitted on (0 before a fit)."""
        return int(self.model.tree_.n_node_samples[0]) if self.model is not None else 0

    def score(self, features: dict[str, float]) -> int:
        row = [[features[f] for f in PACKING_FEATURES]]
        return int(self.model.predict(row)[0])

    def explain_one(self, features: dict[str, float]) -> list[str]:
        """The tree's path for one job, as the tests it passed."""
        tree = self.model.tree_
        row = [[features[f] for f in PACKING_FEATURES]]
        path = self.model.decision_path(row).indices
        steps = []
        for node in path:
            feature = tree.feature[node]
            if feature < 0:
                continue
            name = PACKING_FEATURES[feature]
            threshold = tree.threshold[node]
            went = "<=" if row[0][feature] <= threshold else ">"
            steps.append(f"{name} = {row[0][feature]:g} {went} {threshold:g}")
        steps.append(f"sharing score {self.score(features)}")
        return steps

    def rules(self) -> str:
        from sklearn.tree import export_text

        return str(export_text(self.model, feature_names=list(PACKING_FEATURES)))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            pickle.dump({"kind": "packing", "model": self}, handle)
