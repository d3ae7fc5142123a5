"""A pasted command line -> the importer of the trainer it launches (cmdline.py reads the text).

Which trainer: the program the command runs (``verl.trainer.main_ppo``, ``openrlhf.cli.*``, ``swift rlhf``,
``trl dpo`` / ``trl/scripts/*.py``), weighed with the options' structure: Hydra ``a.b=c`` overrides with
``actor_rollout_ref`` / ``data`` / ``trainer`` sections (verl), ``rlhf_type`` (ms-swift), OpenRLHF's own flags
(``--pretrain``, ``--micro_train_batch_size``, ``--zero_stage``, ...), TRL / TrainingArguments names (TRL). Every
option is named in the report; a value with a shell variable the text does not set is listed as not read.
"""
from __future__ import annotations

from .builder import ConfigImportError, full_plan
from .cmdline import parse_command

OPENRLHF_ONLY = ("pretrain", "micro_train_batch_size", "zero_stage", "n_samples_per_prompt", "prompt_max_len",
                 "generate_max_len", "colocate_all_models", "vllm_num_engines", "actor_num_gpus_per_node",
                 "ref_num_gpus_per_node", "adam_offload", "ref_offload", "init_kl_coef", "reward_pretrain",
                 "max_len", "save_path", "vllm_enable_sleep", "deepspeed_enable_sleep")
VERL_SECTIONS = ("actor_rollout_ref", "data", "trainer", "algorithm", "critic", "reward_model")


def detect_command(cmd) -> dict:
    """{"format", "confidence", "ambiguous", "candidates"} for a parsed command (as detect.detect_format)."""
    scores = {}

    def add(fmt, w, why):
        miss, ev = scores.get(fmt, (1.0, []))
        scores[fmt] = (miss * (1 - w), ev + [why])

    if cmd.program:
        add(cmd.program, 0.9, f"the command runs {cmd.program}'s program")
    secs = [s for s in VERL_SECTIONS if s in cmd.overrides]
    if "actor_rollout_ref" in cmd.overrides:
        add("verl", 0.9, "Hydra overrides of actor_rollout_ref")
    elif secs:
        add("verl", 0.4, f"Hydra overrides of {', '.join(secs)}")
    if "rlhf_type" in cmd.options:
        add("ms-swift", 0.9, "--rlhf_type")
    orl = [k for k in OPENRLHF_ONLY if k in cmd.options]
    if orl:
        add("openrlhf", min(0.9, 0.3 * len(orl)), f"OpenRLHF's flags {', '.join('--' + k for k in orl[:4])}")
    from .detect import TRL_ONLY, HF_ONLY
    trl = [k for k in cmd.options if k in TRL_ONLY or k in HF_ONLY or k in ("model_name_or_path", "beta", "loss_type")]
    if trl and "rlhf_type" not in cmd.options:
        add("trl", min(0.85, 0.3 * len(trl)), f"TRL / TrainingArguments flags {', '.join('--' + k for k in trl[:4])}")
    cands = sorted(({"format": f, "score": round(1 - m, 3), "evidence": ev, "against": []}
                    for f, (m, ev) in scores.items()), key=lambda c: -c["score"])
    if not cands or cands[0]["score"] < 0.3:
        raise ConfigImportError("command", "a command line zerocalc does not read: paste a TRL, OpenRLHF, verl or "
                                           "ms-swift launch command, or a config file")
    s1 = cands[0]["score"]
    s2 = cands[1]["score"] if len(cands) > 1 else 0.0
    return {"format": cands[0]["format"], "confidence": round(max(0.0, s1 - s2 / 2), 2),
            "ambiguous": s2 >= 0.3 and s2 >= 0.6 * s1 and cands[1]["format"] != cands[0]["format"],
            "candidates": [c for c in cands if c["score"] >= 0.3], "source": "command line"}


def import_command(text: str, plan, *, loader=None, fmt: str | None = None):
    """Command-line text -> ImportResult (format, detection, report set by the caller's import_config)."""
    cmd = parse_command(text)
    detection = None
    if not fmt:
        detection = detect_command(cmd)
        fmt = detection["format"]
    if fmt == "verl":
        from .verl import import_verl
        cfg = cmd.overrides
        res = import_verl(cfg, plan, cmd=cmd)
    elif fmt == "openrlhf":
        from .openrlhf import import_openrlhf
        cfg = cmd.options
        res = import_openrlhf(cfg, plan, cmd=cmd, text=text)
    elif fmt == "ms-swift":                 # `torchrun swift/cli/rlhf.py ...`: ms-swift's own reader (swift_cli.py)
        from .swift_cli import import_swift
        env = {"NPROC_PER_NODE": str(cmd.launcher_gpus)} if cmd.launcher_gpus else {}
        cfg = cmd.options
        res = import_swift({"__command__": "rlhf", "__env__": env, **cfg}, plan, loader=loader)
    elif fmt in ("trl", "hf-training-args"):
        from .hf_args import import_hf_args
        cfg = cmd.options
        base = full_plan(plan)
        if cmd.launcher_gpus is not None:
            base = {**base, "gpus_per_node": cmd.launcher_gpus, "nodes": 1}
        res = import_hf_args(cfg, base, loader=loader)
        res = _trl_script_method(res, text, cfg)
        if cmd.launcher_gpus is not None:
            res.applied.append({"key": f"(launcher) {cmd.launcher_key}", "plan_key": "gpus_per_node",
                                "value": cmd.launcher_gpus})
    else:
        raise ConfigImportError("format", f"{fmt} is not read from a command line; paste its config file")
    for k, v in cmd.launcher.items():
        if k in ("num_processes", "nproc-per-node", "nproc_per_node", "num_gpus") and k == (cmd.launcher_key or "")[2:]:
            continue
        why = ("not read: the launcher's config file is not given here; import it (accelerate / DeepSpeed config) "
               "to set the sharding") if k in ("config_file", "deepspeed") else \
            "read: a launcher option with no memory effect of its own"
        res.not_represented.append({"key": f"(launcher) --{k}", "value": v, "reason": why,
                                    "kind": "unknown" if why.startswith("not read") else "read"})
    for k, raw in cmd.unresolved.items():
        res.not_represented.append({"key": k, "value": raw, "kind": "unknown",
                                    "reason": "not read: a shell variable the pasted text does not set "
                                              "(the trainer's default, or the plan's value, is used)"})
    from .builder import no_effect_reason
    relevant = [k for k in cmd.unresolved if not no_effect_reason(k.rsplit(".", 1)[-1]).startswith("no memory")
                and not k.startswith(("data.", "trainer."))]
    if relevant:
        res.warnings.append({"id": "import-shell-variables", "severity": "warning",
                             "message": "not read, their shell variables are not set in the text: "
                                        + ", ".join(sorted(relevant))})
    return res, cfg, fmt, detection


# TRL's scripts by file name -> the config class they parse (trl/scripts/dpo.py: DPOConfig, kto.py: KTOConfig,
# reward_modeling.py: RewardConfig): a pasted command that sets none of that config's own keys is still that method
TRL_SCRIPTS = {"dpo.py": "dpo", "kto.py": "kto", "reward_modeling.py": "rm", "reward.py": "rm", "orpo.py": "orpo",
               "cpo.py": "cpo", "trl dpo": "dpo", "trl kto": "kto", "trl reward": "rm"}


def _trl_script_method(res, text: str, cfg: dict):
    """A TRL script command whose options name no post-training key: the script's method, with the config's
    length default (DPOConfig / KTOConfig / RewardConfig ``max_length`` 1024, two halves)."""
    low = " ".join(text.split())
    method = next((m for name, m in TRL_SCRIPTS.items() if f"/{name}" in low or f" {name}" in low
                   or low.startswith(name)), None)
    if method is None:
        return res
    from zerocalc import Plan, PlanError
    pt = res.plan.get("post_training")
    if pt and pt.get("method") == "dpo" and method in ("orpo", "cpo"):
        # ORPOConfig / CPOConfig share DPOConfig's keys (trl_post reads them as DPO): the script says which
        plan = {**res.plan, "post_training": {**pt, "method": method, "reference": "auto"}}
        try:
            Plan.from_dict(plan)
        except PlanError as e:
            raise ConfigImportError(e.key, str(e)) from None
        res.plan = plan
        res.applied = [a for a in res.applied if a["plan_key"] != "post_training.method"] + [
            {"key": "(script)", "plan_key": "post_training.method", "value": method}]
        return res
    if pt:
        return res
    total = cfg.get("max_length") if isinstance(cfg.get("max_length"), int) else 1024
    plan = {**res.plan, "post_training": {"method": method, "trainer": "trl", "prompt_len": total // 2,
                                          "completion_len": total - total // 2}}
    try:
        Plan.from_dict(plan)
    except PlanError as e:
        raise ConfigImportError(e.key, str(e)) from None
    res.plan = plan
    res.applied += [{"key": "(script)", "plan_key": "post_training.method", "value": method},
                    {"key": "(script)", "plan_key": "post_training.trainer", "value": "trl", "default": True},
                    {"key": "max_length", "plan_key": "post_training.prompt_len", "value": total // 2,
                     "default": "max_length" not in cfg},
                    {"key": "max_length", "plan_key": "post_training.completion_len", "value": total - total // 2,
                     "default": "max_length" not in cfg}]
    return res
