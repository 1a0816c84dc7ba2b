"""Use cases of ``gpuops nodes``: update (rolling change), inspect (health), label (facts).

One module per command; :mod:`.common` holds what they share (inventory, the fast ssh
inspection, the artifacts folder).
"""
