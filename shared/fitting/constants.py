"""Numerical settings every fit shares: bounds, stopping rules, dtype, solver memory."""

from __future__ import annotations

import torch

#: |s| never exceeds this in gradient fits: exp(±15) already spans 13 orders of magnitude.
IMPORTANCE_BOUND = 15.0
#: Standard deviation of the weak prior on values, in units of the targets' sd.
VALUE_PRIOR_SD = 10.0
#: A fit whose squared error is below this share of the targets' variance is exact.
EXACT_FIT = 1e-10
#: A gradient fit whose largest (scaled) gradient entry is below this has converged.
GRAD_TOL = 1e-4
#: The dtype of every fit, on every device (see the module docstring for why).
FIT_DTYPE = torch.float64
#: L-BFGS: stored curvature pairs, and the projected-gradient stop of the scaled objective.
LBFGS_MEMORY = 10
LBFGS_GTOL = 1e-6
#: ``prior_sd="evidence"``: the start, the range and the most re-fits of the prior's sd.
EVIDENCE_START, EVIDENCE_RANGE, EVIDENCE_ROUNDS = 0.25, (0.01, 10.0), 8
# ALS's default relative-improvement stop (fidel with solver="als").
_ALS_TOL = 1e-6
