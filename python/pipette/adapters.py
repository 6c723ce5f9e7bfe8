"""Adapters (filled in below)."""


def apply_torchtitan(config, plan=None):
    raise NotImplementedError


def apply_megatron_bridge(config, plan=None):
    raise NotImplementedError
