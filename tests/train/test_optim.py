"""Adam of section 5.3 on resume: the saved moments come back, the settings are the resumed run's."""

import torch

from aiayn.train.optim import build_optimizer, restore_optimizer, resumed_accumulation, update_record
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


def test_a_resume_on_another_number_of_ranks_keeps_the_batches_of_an_update():
    """accumulation x ranks batches of up to max_tokens an update, as saved: kept where it divides,
    the nearest otherwise (said so), the new settings when they changed; one line, only on a change."""
    config = tiny_config(accumulation=None, update_tokens=1600, max_tokens=200)  # 8 batches an update
    assert resumed_accumulation(config, 2, {}) == (4, None)  # a new run: update_tokens / (200 x 2)
    saved = {"world_size": 2, "update": update_record(config, 2, 4)}
    assert resumed_accumulation(config, 2, saved) == (4, None)
    accumulation, line = resumed_accumulation(config, 4, saved)
    assert accumulation == 2 and line == (
        "resuming on 4 ranks, saved on 2 ranks: accumulation 4 -> 2 keeps 8 batches of up to 200 tokens "
        "an update; the batches go on in the same order, dropout draws afresh"
    )
    assert resumed_accumulation(config, 1, saved)[0] == 8
    accumulation, line = resumed_accumulation(config, 3, saved)
    assert accumulation == 3 and "accumulation 4 -> 3: 9 batches of up to 200 tokens an update, not 8" in line
    explicit = tiny_config(accumulation=3, max_tokens=200)  # a run's own accumulation, not re-derived
    assert (
        resumed_accumulation(explicit, 2, {"world_size": 1, "update": update_record(explicit, 1, 3)})[0] == 2
    )
    assert (
        resumed_accumulation(explicit, 2, {"world_size": 2, "update": update_record(explicit, 2, 1)})[0] == 1
    )
    changed = tiny_config(accumulation=None, update_tokens=3200, max_tokens=200)
    accumulation, line = resumed_accumulation(changed, 4, saved)
    assert accumulation == 4 and "with new update settings: accumulation 4, 16 batches" in line
    assert resumed_accumulation(config, 4, {"world_size": 2})[0] == 2  # before checkpoints said more
