"""The results a report, an export or a comparison shows: what a command's filters select."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Selection:
    gpus: tuple[str, ...] = ()
    envs: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    workflows: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [f"{name} {', '.join(values)}" for name, values in
                 (("gpu", self.gpus), ("env", self.envs), ("model", self.models), ("workflow", self.workflows),
                  ("status", self.statuses)) if values]
        return "; ".join(parts) or "everything"
