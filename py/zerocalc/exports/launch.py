"""Launch commands for the plan's cluster: ``deepspeed``, ``accelerate launch`` and ``torchrun``.

Flags as parsed by deepspeed 0.19.8 launcher/runner.py, accelerate 1.15 commands/launch.py and torch 2.13
distributed/run.py (tests parse the generated commands with those parsers). Multi-node commands use
$MASTER_ADDR / $NODE_RANK placeholders that the cluster (or the user) fills.
"""
from __future__ import annotations

from ..plan import as_plan
from .data_args import env_lines

PORT = 29500


def launch_commands(plan, script: str = "train.py", ds_config_path: str = "ds_config.json",
                    accelerate_path: str = "accelerate.yaml") -> dict:
    """{launcher name: command line}; DeepSpeed plans get deepspeed + accelerate, FSDP accelerate + torchrun,
    DDP torchrun + accelerate, single python."""
    plan = as_plan(plan)
    fw, gpn, nodes = plan.framework, plan.gpus_per_node, plan.nodes
    multi = nodes > 1
    out = {}
    if fw == "single":
        return {"python": f"python {script}"}
    if fw == "deepspeed":
        if multi:
            out["deepspeed"] = (f"deepspeed --hostfile hostfile --num_nodes {nodes} --num_gpus {gpn} "
                                f"--master_addr $MASTER_ADDR --master_port {PORT} {script} --deepspeed {ds_config_path}")
        else:
            out["deepspeed"] = f"deepspeed --num_gpus {gpn} {script} --deepspeed {ds_config_path}"
    acc = f"accelerate launch --config_file {accelerate_path} --num_processes {plan.world_size} --num_machines {nodes}"
    if multi:
        acc += f" --machine_rank $NODE_RANK --main_process_ip $MASTER_ADDR --main_process_port {PORT}"
    out["accelerate"] = f"{acc} {script}"
    if fw in ("fsdp", "ddp"):
        tr = f"torchrun --nnodes {nodes} --nproc_per_node {gpn}"
        if multi:
            tr += f" --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port {PORT}"
        out["torchrun"] = f"{tr} {script}"
    return out


def launch_text(plan, script: str = "train.py") -> str:
    plan = as_plan(plan)
    cmds = launch_commands(plan, script)
    lines = env_lines(plan)
    if plan.framework == "deepspeed" and plan.nodes > 1:
        lines.append("# hostfile for deepspeed (one line per node; passwordless ssh between nodes):")
        lines += [f"#   node-{i} slots={plan.gpus_per_node}" for i in range(plan.nodes)]
    if plan.nodes > 1 and ("accelerate" in cmds or "torchrun" in cmds):
        lines.append(f"# accelerate / torchrun: run on every node, NODE_RANK = 0..{plan.nodes - 1}")
    for name, cmd in cmds.items():
        lines += [f"# {name}", cmd]
    return "\n".join(lines) + "\n"
