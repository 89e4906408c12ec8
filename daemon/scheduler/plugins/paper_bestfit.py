"""The paper-bestfit plugin (beyond Volcano, opt-in): a baseline of the FGD paper, see paper_scores."""

from __future__ import annotations

from typing import Any

from fumarole.daemon.scheduler.plugins.paper_scores import PaperScore, new_bestfit

NAME = "paper-bestfit"


def new(arguments: dict[str, Any]) -> PaperScore:
    return new_bestfit(arguments)
