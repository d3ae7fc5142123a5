"""Launch commands for the plan's cluster: ``deepspeed``, ``accelerate launch`` and ``torchrun``.

Flags as parsed by deepspeed 0.19.8 launcher/runner.py, accelerate 1.15 commands/launch.py and torch 2.13
distributed/run.py (tests parse the generated commands with those parsers). Multi-node commands use
$MASTER_ADDR / $NODE_RANK placeholders that the cluster (or the user) fills.
"""
from __future__ import annotations

from ._plan import plan_dict, world_size

PORT = 29500


def launch_commands(plan, script: str = "train.py", ds_config_path: str = "ds_config.json",
                    accelerate_path: str = "accelerate.yaml") -> dict:
    """{launcher name: command line}; DeepSpeed plans get deepspeed + accelerate, FSDP accelerate + torchrun,
    DDP torchrun + accelerate, single python."""
    p = plan_dict(plan)
    fw, gpn, nodes = p["framework"], int(p["gpus_per_node"]), int(p["nodes"])
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
    acc = f"accelerate launch --config_file {accelerate_path} --num_processes {world_size(p)} --num_machines {nodes}"
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
    p = plan_dict(plan)
    cmds = launch_commands(p, script)
    lines = []
    if p["framework"] == "deepspeed" and p["nodes"] > 1:
        lines.append("# hostfile for deepspeed (one line per node; passwordless ssh between nodes):")
        lines += [f"#   node-{i} slots={p['gpus_per_node']}" for i in range(p["nodes"])]
    if p["nodes"] > 1 and ("accelerate" in cmds or "torchrun" in cmds):
        lines.append(f"# accelerate / torchrun: run on every node, NODE_RANK = 0..{p['nodes'] - 1}")
    for name, cmd in cmds.items():
        lines += [f"# {name}", cmd]
    return "\n".join(lines) + "\n"
