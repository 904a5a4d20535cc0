"""Adam of section 5.3 on resume: the saved moments come back, the settings are the resumed run's."""

import torch

from aiayn.train.optim import build_optimizer, restore_optimizer
from toy_translation import tiny_config

CPU = torch.device("cpu")


def test_restore_keeps_moments_and_takes_the_new_settings():
    model = torch.nn.Linear(4, 3)
    first = build_optimizer(model, tiny_config(), CPU)
    model(torch.randn(5, 4)).square().sum().backward()
    first.step()
    saved = first.state_dict()
    saved["param_groups"][0]["fused"] = True  # as a checkpoint written on a GPU says

    changed = tiny_config(adam_eps=1e-6, adam_beta2=0.99, weight_decay=0.01)
    resumed = build_optimizer(model, changed, CPU)
    restore_optimizer(resumed, saved, changed, CPU)
    group = resumed.param_groups[0]
    assert (group["eps"], group["betas"], group["weight_decay"]) == (1e-6, (0.9, 0.99), 0.01)
    assert group["fused"] is None and group["foreach"] is True
    for p in model.parameters():
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(resumed.state[p][key], first.state[p][key])
