"""Apply a pipette plan to a training stack's own configuration object.

Neither torchtitan nor Megatron-Bridge is imported: an adapter sets the
plan's values as attributes of the object it is given, after checking that
the object has every field it will set (a field the config lacks, from
another release or a renamed upstream field, raises :class:`pipette.Error`
and nothing is set).  The plan is a dict from :func:`pipette.plan`, or the
JSON file :func:`pipette.load_plan` reads (a path, or the file named by
``PIPETTE_PLAN_FILE``).  Each adapter returns the list of ``(attribute
path, value)`` it set.

The field names are those of the upstream sources listed in
tests/data/python/config-fields.tsv (pytorch/torchtitan b5bcd76c and
v0.2.2, NVIDIA-NeMo/Megatron-Bridge 067f987d with NVIDIA/Megatron-LM
2a75ac12); the tests apply plans to stand-ins built from those lists.
"""

import sys

# --------------------------------------------------------------------------
# torchtitan

# pipette's schedule names -> torch.distributed.pipelining's, as
# get_schedule_class reads them (core/render/torchtitan.c, torch_schedule;
# tests/data/stacks/torch-schedules.md).
_TORCH_SCHEDULES = {
    "1f1b": "1F1B", "interleaved": "Interleaved1F1B", "gpipe": "GPipe",
    "interleaved-zb": "InterleavedZeroBubble", "zbv": "ZBVZeroBubble",
    "dualpipe-v": "DualPipeV",
}

# The activation checkpointing classes of torchtitan after v0.2.2
# (torchtitan/distributed/activation_checkpoint.py:166-197 @b5bcd76c).
_TT_AC_MODULE = "torchtitan.distributed.activation_checkpoint"


def _error(message):
    from . import Error
    return Error(2, message)


def _plan(plan):
    from . import load_plan
    return load_plan(plan)


def _check_stack(doc, accepted, target):
    stack = doc.get("stack")
    if stack not in accepted:
        raise _error("plan: stack '%s': %s applies plans made for %s (pipette plan --stack %s)"
                     % (stack, target, " or ".join(accepted), accepted[0]))


def _config_field(doc, name):
    try:
        return doc["config"][name]
    except (KeyError, TypeError):
        raise _error("plan: config.%s: missing (a pipette-plan/1 document from pipette plan "
                     "--format json)" % name) from None


def _layers(doc):
    """The model's layers: the sum over the pipeline ranks of their stages'."""
    try:
        return sum(s["layers"] for s in doc["predicted"]["memory"]["per_stage"])
    except (KeyError, TypeError):
        raise _error("plan: predicted.memory.per_stage: missing (a pipette-plan/1 document)") \
            from None


def _torchtitan_fields(doc, head):
    """[(path, value)] of a torchtitan plan: after v0.2.2 (head) or v0.2.2.

    The same fields, with the same values, as `pipette plan --format
    torchtitan` writes in its recipe module and its TOML
    (core/render/torchtitan.c; the field list with sources:
    tests/data/stacks/torchtitan-config.tsv)."""
    c = {k: _config_field(doc, k) for k in (
        "tp", "pp", "cp", "ep", "dp_shard", "dp_replicate", "fsdp_reshard_after_forward",
        "schedule", "micro_batch", "microbatches", "global_batch", "seq_len", "recompute",
        "recompute_every", "vpp", "precision")}
    if c["precision"] != "bf16":
        raise _error("plan: config.precision '%s': set the linear layers' converter with the "
                     "recipe module of pipette plan --format torchtitan (the adapter applies "
                     "bf16 plans)" % c["precision"])
    f = [("parallelism.data_parallel_replicate_degree", c["dp_replicate"]),
         ("parallelism.data_parallel_shard_degree", c["dp_shard"]),
         ("parallelism.fsdp_reshard_after_forward", c["fsdp_reshard_after_forward"]),
         ("parallelism.tensor_parallel_degree", c["tp"]),
         ("parallelism.context_parallel_degree", c["cp"]),
         ("parallelism.expert_parallel_degree", c["ep"]),
         ("parallelism.pipeline_parallel_degree", c["pp"])]
    if c["pp"] > 1:
        schedule = _TORCH_SCHEDULES.get(c["schedule"])
        if schedule is None:
            raise _error("plan: config.schedule '%s': torchtitan cannot run it" % c["schedule"])
        # stages per rank: 2 for the V schedules, the interleaving for the
        # looped ones, else 1 (pipette_config_chunks, core/inputs/config.c)
        chunks = (2 if c["schedule"] in ("zbv", "dualpipe-v")
                  else c["vpp"] if c["schedule"] in ("interleaved", "interleaved-zb") else 1)
        f += [("parallelism.pipeline_parallel_schedule", schedule),
              ("parallelism.pipeline_parallel_layers_per_stage",
               _layers(doc) // (c["pp"] * chunks)),
              # the embedding and the output layer weigh no layer: the
              # split is the layers' own (issue 29, item 4)
              ("parallelism.pipeline_parallel_first_stage_less_layers", 0),
              ("parallelism.pipeline_parallel_last_stage_less_layers", 0)]
        if head:
            f += [("parallelism.num_pp_microbatches", c["microbatches"]),
                  ("training.disable_cuda_graphs", True)]
        else:
            f.append(("parallelism.pipeline_parallel_microbatch_size", c["micro_batch"]))
    if head:
        f += [("training.max_context_length", c["seq_len"]),
              ("training.num_tokens_per_microbatch_per_dp_rank", c["micro_batch"] * c["seq_len"]),
              ("training.num_tokens_per_train_step", c["global_batch"] * c["seq_len"])]
    else:
        # local_batch_size: sequences per DP rank per step; with PP every
        # micro-batch of the pipeline
        local = c["microbatches"] * c["micro_batch"] if c["pp"] > 1 else c["micro_batch"]
        f += [("training.local_batch_size", local),
              ("training.global_batch_size", c["global_batch"]),
              ("training.seq_len", c["seq_len"])]
        if c["recompute"] == "none":
            f.append(("activation_checkpoint.mode", "none"))
        elif c["recompute"] == "full" and c["recompute_every"] == 1:
            f.append(("activation_checkpoint.mode", "full"))
        else:
            f.append(("activation_checkpoint.mode", "selective"))
            f.append(("activation_checkpoint.selective_ac_option",
                      "op" if c["recompute"] == "selective" else str(c["recompute_every"])))
    return f


def _torchtitan_ac(doc, config):
    """activation_checkpoint after v0.2.2: an instance of the class the
    plan's recomputation names, from the torchtitan the config came from."""
    recompute = _config_field(doc, "recompute")
    if recompute == "none":
        return None
    if recompute == "full" and _config_field(doc, "recompute_every") > 1:
        raise _error("plan: config.recompute_every %d: torchtitan after v0.2.2 has no "
                     "every-k-th-layer checkpointing" % _config_field(doc, "recompute_every"))
    module = sys.modules.get(_TT_AC_MODULE)
    if module is None:
        import importlib
        try:
            module = importlib.import_module(_TT_AC_MODULE)
        except ImportError:
            raise _error("activation_checkpoint: %s cannot be imported (the plan's "
                         "checkpointing is a class of it)" % _TT_AC_MODULE) from None
    cls = getattr(getattr(module, "FullAC" if recompute == "full" else "SelectiveAC", None),
                  "Config", None)
    if cls is None:
        raise _error("activation_checkpoint: %s has no %s.Config" % (
            _TT_AC_MODULE, "FullAC" if recompute == "full" else "SelectiveAC"))
    return cls()


def _resolve(obj, path, what):
    """The object holding the last part of a dotted path, and that part."""
    parts = path.split(".")
    for i, p in enumerate(parts[:-1]):
        if not hasattr(obj, p) or getattr(obj, p) is None:
            raise _error("%s: has no %s (the plan sets %s)" % (what, ".".join(parts[:i + 1]),
                                                                path))
        obj = getattr(obj, p)
    if not hasattr(obj, parts[-1]):
        raise _error("%s: has no field %s (the plan sets it)" % (what, path))
    return obj, parts[-1]


def _set_all(config, fields, what):
    """Check every field, then set them all: nothing is set on an error."""
    targets = [(_resolve(config, path, what), value) for path, value in fields]
    for (obj, name), value in targets:
        setattr(obj, name, value)
    return list(fields)


def apply_torchtitan(config, plan=None):
    """Set a torchtitan plan on a torchtitan config and return what was set.

    ``config`` is a ``Trainer.Config`` of torchtitan after v0.2.2 (batch in
    tokens: training.num_tokens_per_microbatch_per_dp_rank) or the
    ``JobConfig`` of torchtitan up to v0.2.2 (training.local_batch_size);
    the fields are those ``pipette plan --format torchtitan`` writes:
    parallelism.* degrees, schedule and layers per stage, the batch and
    sequence length, and the activation checkpointing (a ``FullAC.Config``
    / ``SelectiveAC.Config`` instance, or None, after v0.2.2;
    activation_checkpoint.mode up to v0.2.2).  ``plan`` is a plan dict, a
    path, or None for ``PIPETTE_PLAN_FILE``.  A plan made for another stack
    than torchtitan, a config that has neither form, or one that lacks a
    field raises :class:`pipette.Error`.
    """
    doc = _plan(plan)
    _check_stack(doc, ("torchtitan",), "the torchtitan adapter")
    training = getattr(config, "training", None)
    if hasattr(training, "num_tokens_per_microbatch_per_dp_rank"):
        head = True
    elif hasattr(training, "local_batch_size"):
        head = False
    else:
        raise _error("torchtitan config: training has neither num_tokens_per_microbatch_per_dp_"
                     "rank (torchtitan after v0.2.2) nor local_batch_size (v0.2.2): not a "
                     "torchtitan Trainer.Config or JobConfig")
    fields = _torchtitan_fields(doc, head)
    if head:
        fields.append(("activation_checkpoint", _torchtitan_ac(doc, config)))
    return _set_all(config, fields, "torchtitan config")


# --------------------------------------------------------------------------
# Megatron-Bridge

# The plan's Megatron-LM arguments are what Megatron-Core is given; the
# Bridge's ConfigContainer holds the same Megatron-Core config classes.
# Megatron-LM fills each of them from its one argument namespace by field
# name (megatron/training/arguments.py core_transformer_config_from_args,
# megatron/training/training.py get_model/setup_model_and_optimizer), and
# the Bridge hands a MixedPrecisionConfig's fields on to every config with
# a field of that name (update_config_with_precision_overrides,
# src/megatron/bridge/training/mixed_precision.py:138-161 @067f987d): so a
# flag's value goes to every section that has its field.
_BRIDGE_SECTIONS = ("model", "train", "ddp", "optimizer", "dataset", "comm_overlap")

# Where Megatron-LM declares a flag's field, when not in TransformerConfig
# or ModelParallelConfig (the model): TrainingConfig
# (megatron/training/config/training_config.py @2a75ac12), the DDP config
# (megatron/core/distributed/distributed_data_parallel_config.py), the
# optimizer's (megatron/core/optimizer/optimizer_config.py); the Bridge's
# dataset config repeats the sequence length
# (src/megatron/bridge/training/config.py:231 @067f987d).
_BRIDGE_HOMES = {
    "micro_batch_size": ("train",), "global_batch_size": ("train",),
    "use_distributed_optimizer": ("ddp", "optimizer"), "overlap_grad_reduce": ("ddp",),
    "overlap_param_gather": ("ddp",), "num_distributed_optimizer_instances": ("ddp",),
    "use_precision_aware_optimizer": ("optimizer",), "seq_length": ("model", "dataset"),
    # Megatron-FSDP (distributed_data_parallel_config.py:90-138)
    "use_megatron_fsdp": ("ddp",), "data_parallel_sharding_strategy": ("ddp",),
    "fsdp_double_buffer": ("ddp",),
}
# Flags whose value belongs to a config the plan does not own: the
# checkpoint format Megatron-FSDP's checkpoints need (--ckpt-format
# fsdp_dtensor, arguments.py:1169-1170) is the Bridge's checkpoint config,
# which the user sets with the checkpoint directory.
_SKIP_DESTS = ("ckpt_format",)
# Flags whose dest is not the flag's name with '-' -> '_' (Megatron-LM's
# rule; tests/data/stacks/megatron-args.tsv).
_FLAG_DEST = {
    "--fp8-format": "fp8",	# transformer_config.py:587-589 @2a75ac12
    "--fp4-format": "fp4",	# transformer_config.py:673-675
    "--decoder-first-pipeline-num-layers": "num_layers_in_first_pipeline_stage",
    "--decoder-last-pipeline-num-layers": "num_layers_in_last_pipeline_stage",
}
# Flags taking several values (nargs='+').
_LIST_DESTS = ("recompute_modules",)
# Values that are Python objects of Megatron-Core or torch, not numbers or
# strings: the adapter does not build them.
_OBJECT_DESTS = {"attention_backend": "an AttnBackend member",
                 "exp_avg_dtype": "a torch.dtype", "exp_avg_sq_dtype": "a torch.dtype"}
# MixedPrecisionConfig's recipe functions by the plan's precision
# (src/megatron/bridge/training/mixed_precision.py:184-420 @067f987d).
_BRIDGE_RECIPES = {
    "bf16": "bf16_mixed", "fp8-delayed": "bf16_with_fp8_delayed_scaling_mixed",
    "fp8-current": "bf16_with_fp8_current_scaling_mixed",
    "fp8-blockwise": "bf16_with_fp8_subchannel_scaling_mixed",
    "mxfp8": "bf16_with_mxfp8_mixed", "nvfp4": "bf16_with_nvfp4_mixed",
}
# The precision fields a MixedPrecisionConfig holds and hands on.
_PRECISION_DESTS = ("bf16", "fp8", "fp8_recipe", "fp4", "fp4_recipe", "first_last_layers_bf16",
                    "num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16",
                    "grad_reduce_in_fp32", "fp8_param_gather",
                    "reuse_grad_buf_for_mxfp8_param_ag")


def _value(text):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _megatron_dests(args):
    """The plan's Megatron-LM arguments as [(dest, value)]."""
    import shlex
    out, tokens = [], shlex.split(args)
    i = 0
    while i < len(tokens):
        flag = tokens[i]
        if not flag.startswith("--"):
            raise _error("plan: megatron_args: '%s' is not a flag" % flag)
        values = []
        i += 1
        while i < len(tokens) and not tokens[i].startswith("--"):
            values.append(tokens[i])
            i += 1
        dest = _FLAG_DEST.get(flag, flag[2:].replace("-", "_"))
        if dest in _LIST_DESTS:
            value = values
        elif not values:
            value = True	# store_true
        elif len(values) == 1:
            value = _value(values[0])
        else:
            raise _error("plan: megatron_args: %s takes one value, not %d" % (flag, len(values)))
        out.append((flag, dest, value))
    return out


def _vpp_of(dest, value, config, pp):
    """virtual_pipeline_model_parallel_size as Megatron-LM derives it from
    the flag (megatron/training/arguments.py:893-945 @2a75ac12); None: 1."""
    if dest == "pipeline_model_parallel_layout":
        if "(" in value:
            raise _error("plan: --pipeline-model-parallel-layout: repetitions are not read")
        stages = len(value.split("|"))	# get_num_stages_from_str
        vpp = stages // pp
    elif dest == "num_virtual_stages_per_pipeline_rank":
        vpp = value
    else:	# num_layers_per_virtual_pipeline_stage
        layers = getattr(getattr(config, "model", None), "num_layers", None)
        if not layers:
            raise _error("Megatron-Bridge config: model.num_layers is not set (the plan's "
                         "--num-layers-per-virtual-pipeline-stage needs it)")
        vpp = layers // pp // value
    return vpp if vpp > 1 else None


def _bridge_fields(doc, config):
    """[(path, value)] of a Megatron-Core plan on a ConfigContainer."""
    args = doc.get("megatron_args")
    if not isinstance(args, str):
        raise _error("plan: megatron_args: %s" % (doc.get("megatron_args_refused")
                                                  or "missing (a pipette-plan/1 document)"))
    dests = _megatron_dests(args)
    pp = next((v for _, d, v in dests if d == "pipeline_model_parallel_size"), 1)
    mp = getattr(config, "mixed_precision", None)
    mp_object = mp is not None and not isinstance(mp, str)
    # without --grad-reduce-in-bf16 Megatron-LM reduces in fp32
    # (arguments.py:1179-1183 @2a75ac12)
    fields, precision = [], {"fp8": None, "fp4": None, "grad_reduce_in_fp32": True}
    for flag, dest, value in dests:
        if dest in _OBJECT_DESTS:
            raise _error("plan: %s %s: the Megatron-Bridge config takes %s there; set it "
                         "yourself" % (flag, value, _OBJECT_DESTS[dest]))
        if dest == "grad_reduce_in_bf16":	# arguments.py:1179-1180 @2a75ac12
            dest, value = "grad_reduce_in_fp32", False
        if dest in _PRECISION_DESTS:
            precision[dest] = value
            continue
        if dest in _SKIP_DESTS:
            continue
        if dest == "cpu_offloading_num_layers":	# > 0 turns it on: arguments.py:1950-1951
            fields.append(("model.cpu_offloading", int(value) > 0))
        if dest in ("pipeline_model_parallel_layout", "num_virtual_stages_per_pipeline_rank",
                    "num_layers_per_virtual_pipeline_stage"):
            fields.append(("model.virtual_pipeline_model_parallel_size",
                           _vpp_of(dest, value, config, pp)))
            if dest != "pipeline_model_parallel_layout":
                continue
            # a layout replaces the recipe's uneven first/last stages
            # (issue 29, item 2), as NVIDIA's scripts clear them
            fields += [("model.num_layers_in_first_pipeline_stage", None),
                       ("model.num_layers_in_last_pipeline_stage", None),
                       ("model.account_for_embedding_in_pipeline_split", False),
                       ("model.account_for_loss_in_pipeline_split", False)]
        # its home sections must have it; the others get it where they do
        homes = _BRIDGE_HOMES.get(dest, ("model",))
        also = [s for s in _BRIDGE_SECTIONS if s not in homes and
                getattr(config, s, None) is not None and hasattr(getattr(config, s), dest)]
        fields += [("%s.%s" % (s, dest), value) for s in list(homes) + also]
    return fields + _bridge_precision(doc, precision, mp_object)


def _bridge_precision(doc, precision, mp_object):
    """The plan's precision: on the container's MixedPrecisionConfig, which
    the Bridge hands on to model, optimizer and ddp at setup; or, where the
    container names a recipe or none, the recipe of the plan's precision."""
    if mp_object:
        return [("mixed_precision.%s" % k, v) for k, v in sorted(precision.items())]
    recipe = _BRIDGE_RECIPES.get(_config_field(doc, "precision"))
    if recipe is None:
        raise _error("plan: config.precision '%s': Megatron-Bridge has no recipe for it"
                     % _config_field(doc, "precision"))
    # what the recipe sets itself: the format and scaling of its precision,
    # bf16, fp32 gradient reduction and, for the per-tensor and MXFP8
    # recipes the plan gathers them for, FP8 parameters and the MXFP8
    # gather in the gradient buffer (mixed_precision.py:184-420)
    extra = sorted(k for k in precision if k not in ("fp8", "fp4", "fp8_recipe", "fp4_recipe",
                                                    "bf16", "grad_reduce_in_fp32",
                                                    "fp8_param_gather",
                                                    "reuse_grad_buf_for_mxfp8_param_ag")
                   or (k == "grad_reduce_in_fp32" and precision[k] is not True))
    if extra:
        raise _error("Megatron-Bridge config: mixed_precision is a recipe name, which cannot "
                     "say %s; give the container a MixedPrecisionConfig (e.g. %s()) and apply "
                     "the plan again" % (", ".join("%s=%s" % (k, precision[k]) for k in extra),
                                         recipe))
    return [("mixed_precision", recipe)]


def apply_megatron_bridge(config, plan=None):
    """Set a Megatron-Core plan on a Megatron-Bridge ConfigContainer and
    return what was set.

    The plan's Megatron-LM arguments (its ``megatron_args``: the flags the
    prediction assumed) become the fields of the same names in
    ``config.model`` (tensor_model_parallel_size,
    pipeline_model_parallel_size, virtual_pipeline_model_parallel_size,
    context_parallel_size, expert_model_parallel_size, sequence_parallel,
    recompute_*, the MoE dispatcher, TP overlap ...), ``config.train``
    (micro_batch_size, global_batch_size), ``config.ddp`` and
    ``config.optimizer`` (use_distributed_optimizer, overlap_grad_reduce,
    overlap_param_gather), ``config.dataset`` (seq_length) and
    ``config.comm_overlap`` when the container has one; the precision goes
    to ``config.mixed_precision``.  Plans for the stacks megatron, nemo and
    megatron-bridge (all Megatron-Core) are applied; another stack, or a
    field the container lacks, raises :class:`pipette.Error`.
    """
    doc = _plan(plan)
    _check_stack(doc, ("megatron", "nemo", "megatron-bridge"), "the Megatron-Bridge adapter")
    for section in ("model", "train", "ddp", "optimizer"):
        if getattr(config, section, None) is None:
            raise _error("Megatron-Bridge config: has no %s (not a ConfigContainer)" % section)
    return _set_all(config, _bridge_fields(doc, config), "Megatron-Bridge config")
