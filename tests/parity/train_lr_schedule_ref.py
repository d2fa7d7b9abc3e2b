#!/usr/bin/env python3
"""Learning rates from transformers' schedulers (the reference for Ferry's lr_schedule)."""
import json
import pathlib
import sys

import torch
from transformers.optimization import (get_constant_schedule_with_warmup,
                                       get_cosine_with_min_lr_schedule_with_warmup,
                                       get_linear_schedule_with_warmup)

out = pathlib.Path(sys.argv[1])
cases = []
for kind, warmup, total, min_ratio in [("cosine", 10, 100, 0.0), ("cosine", 0, 37, 0.1), ("cosine", 5, 20, 0.5),
                                       ("linear", 10, 100, 0.0), ("linear", 0, 13, 0.0),
                                       ("constant", 7, 50, 0.0)]:
    peak = 3e-4
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    if kind == "cosine":
        sched = get_cosine_with_min_lr_schedule_with_warmup(opt, warmup, total, min_lr_rate=min_ratio)
    elif kind == "linear":
        sched = get_linear_schedule_with_warmup(opt, warmup, total)
    else:
        sched = get_constant_schedule_with_warmup(opt, warmup)
    lrs = []
    for _ in range(total + 3):  # a few steps past the end too
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    cases.append({"kind": kind, "warmup": warmup, "total": total, "min_ratio": min_ratio, "peak": peak, "lrs": lrs})
(out / "lr_schedules.json").write_text(json.dumps(cases))
