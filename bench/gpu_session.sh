#!/usr/bin/env bash
# The GPU runs of docs/engine.md ("On a GPU"), one step per device call, in the order given, on a
# machine with no network: the engine venv is installed from the offline wheelhouse parts carried
# as .wh01 .. .wh05 (docs/engine.md "Air-gapped install"); the project's own dependencies that
# neither vLLM nor the image brings travel as wheels in .whl, with the last part (made where there
# is network: `pip download --only-binary=:all: --python-version 3.12 --implementation cp
# --platform manylinux_2_17_x86_64 --platform any -d .whl` of pyproject.toml's dependencies and
# pytest-asyncio, after `pip wheel --no-deps -w .whl antlr4-python3-runtime==4.9.3`, which has no
# wheel; less what the runtime list or torch bring, 10 MB; pip takes from it only what is missing).
# Every step writes its figures and logs under $OUT (default bench/results/gpu).
#
#   bash bench/gpu_session.sh stage .wh01        (once per part but the last)
#   bash bench/gpu_session.sh install .wh05      (the last part: join, verify, install; + the project)
#   bash bench/gpu_session.sh quickstart         (the quick start's stack on the GPU; the Gemma refit check)
#   bash bench/gpu_session.sh replicas           (two engines sharing the GPU, one killed; the Gemma quirk via ng_run)
#   bash bench/gpu_session.sh dense8b [NAME ARGS] (an 8B-shaped dummy model: start-up and through-stack efficiency;
#                                                 NAME names the result files, ARGS go to bench/engine_efficiency.py)
#   bash bench/gpu_session.sh ckpt8b             (two random 8B-shaped checkpoints, A and B, under /tmp/ng-ckpt;
#                                                 image python3 is enough: it can run before the install)
#   bash bench/gpu_session.sh weights8b          (weight updates at real size: bench/weight_update_8b.py over A and B
#                                                 with gpu_dense_8b_weights.yaml, then warm and cold with fastsafetensors)
#   bash bench/gpu_session.sh loaders8b          (the same warm updates with vLLM's multi-thread loader)
#   bash bench/gpu_session.sh pushipc8b [ROUNDS] (issue 41, colocated: a trainer process on the same GPU pushes A and
#                                                 B by CUDA IPC (begin/push/commit) interleaved with disk updates,
#                                                 bench/weight_push.py --transfer ipc over gpu_dense_8b_push_ipc.yaml)
#   bash bench/gpu_session.sh delta8b [ROUNDS]  (issue 41, one GPU: B2 = A with 2% of its elements changed, and the
#                                                 delta A -> B2; delta vs full B2 from disk, interleaved, bench/weight_delta.py)
#   bash bench/gpu_session.sh pushnccl8b [ROUNDS] (issue 41, two GPUs: the trainer on GPU 0 broadcasts A and B over
#                                                 NCCL into the engine on GPU 1, interleaved with disk updates,
#                                                 bench/weight_push.py --transfer nccl over gpu_dense_8b_push_nccl.yaml)
#   bash bench/gpu_session.sh trlsync [STEPS]    (issue 41 step 4, two GPUs: TRL's grpo_nemo_gym.py main() unchanged
#                                                 (TRL_SCRIPT, default /tmp/ng-trl/grpo_nemo_gym.py; TRL's, not in this
#                                                 repository), TRL's NCCL sync into the stack's engine: the trainer on
#                                                 GPU 0, the engine on GPU 1 (gpu_ids); bench/trl_nemo_gym.py --trl-sync;
#                                                 trl, datasets and multiprocess travel in .whl)
# Issue 28's rest, on two GPUs (nvidia-h100-x2):
#   bash bench/gpu_session.sh ckptmoe            (the tiny Qwen3-MoE of moe_dp2_ep2.yaml, and two random real
#                                                 checkpoints of it, moeA and moeB, under /tmp/ng-ckpt)
#   bash bench/gpu_session.sh eff28              (efficiency in the training configuration, 8B shape, CUDA graphs:
#                                                 token ids + logprobs on GPU 0 (with NeMo Gym's tool rows, strict
#                                                 stripped vs kept) and token ids alone on GPU 1, at once)
#   bash bench/gpu_session.sh moe28              (moe_dp2_ep2.yaml through ng_run: external LB (EP, rollouts, soak
#                                                 of one rank, updates idle and under load), then internal LB)
#   bash bench/gpu_session.sh tp2                (the 8B shape at TP 2, direct, the same workload as eff28)
#   bash bench/gpu_session.sh eff38 [NAME]       (issue 38 on one GPU: direct, model server and stack with token ids
#                                                 + logprobs at 256 and 1,024, 4 waves a path (256 in flight: about
#                                                 10 s each, where the 2 waves of 2026-11-28 took 4 s and rounds
#                                                 varied by 20%; 1,024: about 50 s), 3 interleaved rounds, about
#                                                 9 min after the engine's start; dense8b underneath)
#   bash bench/gpu_session.sh issue28            (ckptmoe, eff28, moe28, tp2 in that order: one background step)
#
# Issue 41's last steps, as they ran on 2026-11-28 (two H200s; the whole sequence 844 s of device time):
#   call 1 carries .gputree and .whl (copied to /tmp/ng-tree), calls 2-6 stage .wh01-.wh05 from
#   /tmp/ng-tree/bench/gpu_session.sh with absolute part paths, call 7 installs .wh06 and starts
#   `TRL_SCRIPT=/tmp/ng-tree/trl_script/grpo_nemo_gym.py bash bench/gpu_session.sh bg issue41d`;
#   then `poll` calls back to back: the machine is given back after 30 s with no call, and a
#   background step dies with it (lost once on 2026-11-28, with the install).
# The device tool sends the checkout the session started in (the main checkout), not a helper's
# worktree: carry a helper's changes as a patch in an ignored folder, apply it to a copy of the tree
# on the device (`/tmp/ng-tree`, `patch -p1`) and run the steps from there with PYTHONPATH=/tmp/ng-tree.
# What ran on 2026-11-28 (two H200s): the tree travels with every call (about 20 MB), so the
# wheelhouse went as six parts of 34 MiB (`split_wheelhouse(..., part_mib=34)`), each call under the
# 64 MiB limit; and a `git archive HEAD` snapshot of ng_cli, bench, scripts, pyproject.toml,
# responses_api_models, responses_api_agents, resources_servers and tests/fixtures travelled as an
# ignored folder, copied to /tmp/ng-tree in the first call and run from there, so that no helper's
# half-made edit in the working tree reached the device. Kill leftovers there with bracketed
# patterns (`pkill -f "[v]llm"`): a plain `pkill -f vllm` matches the call's own shell.
# A step longer than one device call (10 minutes; an 8B engine's first start alone takes ~4) runs
# in the background and is polled by the calls after it, back to back (the machine is given back
# after 30 s idle):
#   bash bench/gpu_session.sh bg STEP            (STEP under setsid; its files go to /tmp/ng-results)
#   bash bench/gpu_session.sh poll SECONDS       (wait up to SECONDS for the background steps, show their
#                                                 logs' tails, copy /tmp/ng-results into $OUT)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-bench/results/gpu}"
mkdir -p "$OUT"
VENV=/tmp/vllm-venv
STAGE=/tmp/ng-wh
PY="$VENV/bin/python"
export NG_VLLM_VENV="$VENV" PYTHONUNBUFFERED=1 NG_GPU_RESULTS="$OUT"

step="${1:?usage: gpu_session.sh stage|install|quickstart|replicas|dense8b|ckpt8b|weights8b|loaders8b|pushipc8b|pushnccl8b|delta8b|trlsync|ckptmoe|eff28|moe28|tp2|eff38|issue28|issue41a|issue41b|issue41c|issue41d|bg|poll [args]}"
case "$step" in
  stage)
    bash scripts/build_vllm_env.sh --wheelhouse "${2:?part folder}" --stage "$STAGE" --stage-only
    ;;
  install)
    started=$(date +%s)
    bash scripts/build_vllm_env.sh --wheelhouse "${2:?last part folder}" --stage "$STAGE" --python python3 --venv "$VENV"
    # The project's servers run in the same interpreter (vLLM brings fastapi, pydantic, uvicorn ...);
    # pip takes from the carried wheels only what neither the venv nor the image already has;
    # pytest-asyncio for tests/gpu (the image has pytest).
    "$PY" -m pip install -q --no-index --find-links .whl --no-build-isolation -e . pytest-asyncio
    # TRL for the trlsync step, when its wheels travelled; the image has its other needs (accelerate,
    # pandas, pyarrow, xxhash), so no resolver run that could pull in another version of them.
    if compgen -G ".whl/trl-*.whl" > /dev/null; then
      "$PY" -m pip install -q --no-index --no-deps .whl/trl-*.whl .whl/datasets-*.whl .whl/multiprocess-*.whl
    fi
    "$PY" -c "import vllm, torch, ng_cli; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))" \
      | tee "$OUT/install.txt"
    echo "install took $(( $(date +%s) - started )) s" | tee -a "$OUT/install.txt"
    nvidia-smi -L | tee -a "$OUT/install.txt"
    ;;
  quickstart)
    mkdir -p /tmp/ng-models
    "$PY" ng_cli/toolchain/tiny_model.py --arch gemma3 --out /tmp/ng-models/tiny-gemma3 > /dev/null
    "$PY" bench/gemma_dummy_refit.py --model /tmp/ng-models/tiny-gemma3 --out "$OUT/gemma_dummy_refit.json" \
      > "$OUT/gemma_dummy_refit.log" 2>&1 || echo "gemma_dummy_refit failed: see its log"
    "$PY" -m pytest -p no:cacheprovider -x -q tests/gpu -k quickstart 2>&1 | tee "$OUT/pytest_quickstart.txt"
    ;;
  replicas)
    "$PY" -m pytest -p no:cacheprovider -q tests/gpu -k "two_replicas or gemma3" 2>&1 | tee "$OUT/pytest_replicas.txt"
    ;;
  dense8b)
    mkdir -p /tmp/ng-models
    "$PY" ng_cli/toolchain/tiny_model.py --arch llama3-8b --out /tmp/ng-models/llama3-8b-shape > /dev/null
    name="${2:-engine_efficiency_8b_graphs}"
    shift $(( $# > 1 ? 2 : 1 ))
    "$PY" bench/engine_efficiency.py --config responses_api_models/local_vllm_model/configs/gpu_dense_8b_dummy.yaml \
      --stack --concurrency 64 256 1024 --waves 4 --rounds 3 --max-tokens 128 --agent-workers 4 "$@" \
      --out "$OUT/$name.json" 2>&1 | tee "$OUT/$name.txt"
    ;;
  eff38)
    bash bench/gpu_session.sh dense8b "${2:-efficiency_8b_token_ids_eff38}" --concurrency 256 1024 \
      --waves "${WAVES:-4}" --rounds "${ROUNDS:-3}" --paths direct model stack --set return_token_id_information=true
    ;;
  ckpt8b)
    # The 8B shape (config and tokenizer), then its weights twice: random bf16 drawn on the GPU.
    CKPY="$PY"; [ -x "$CKPY" ] || CKPY=python3
    mkdir -p /tmp/ng-models /tmp/ng-ckpt
    started=$(date +%s)
    "$CKPY" ng_cli/toolchain/tiny_model.py --arch llama3-8b --out /tmp/ng-models/llama3-8b-shape > /dev/null
    rm -f "$OUT/checkpoints.jsonl" /tmp/ng-ckpt/.done
    for spec in A:1 B:2; do
      "$CKPY" bench/make_random_checkpoint.py --config-dir /tmp/ng-models/llama3-8b-shape \
        --out "/tmp/ng-ckpt/${spec%%:*}" --seed "${spec##*:}" --report "$OUT/checkpoints.jsonl"
    done
    sync
    du -sh /tmp/ng-ckpt/A /tmp/ng-ckpt/B | tee -a "$OUT/checkpoints.txt"
    df -h /tmp | tee -a "$OUT/checkpoints.txt"
    echo "checkpoints made in $(( $(date +%s) - started )) s" | tee -a "$OUT/checkpoints.txt"
    touch /tmp/ng-ckpt/.done
    ;;
  weights8b)
    for _ in $(seq 600); do [ -f /tmp/ng-ckpt/.done ] && break; sleep 1; done
    [ -f /tmp/ng-ckpt/.done ] || { echo "no checkpoints: run the ckpt8b step first" >&2; exit 2; }
    env_config=resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml
    config=responses_api_models/local_vllm_model/configs/gpu_dense_8b_weights.yaml
    engine="policy_model.responses_api_models.local_vllm_model"
    common=(--config "$env_config" --config "$config" --checkpoint-a /tmp/ng-ckpt/A --checkpoint-b /tmp/ng-ckpt/B --updates 5)
    "$PY" bench/weight_update_8b.py "${common[@]}" --label "vLLM default loader" \
      --override "++example_single_tool_call_simple_agent.responses_api_agents.simple_agent.num_workers=4" \
      --output "$OUT/weight_update_8b.json" 2>&1 | tee "$OUT/weight_update_8b.txt" || true
    if ! grep -q '"stack_ready_s"' "$OUT/weight_update_8b.json"; then
      # The stack did not start: once more without sleep mode (the one option beyond the dummy config's).
      "$PY" bench/weight_update_8b.py "${common[@]}" --phases warm,floor,cold,load --label "no sleep mode" \
        --override "++$engine.vllm_serve_kwargs.enable_sleep_mode=false" \
        --override "++example_single_tool_call_simple_agent.responses_api_agents.simple_agent.num_workers=4" \
        --output "$OUT/weight_update_8b_no_sleep_mode.json" 2>&1 | tee "$OUT/weight_update_8b_no_sleep_mode.txt" || true
    fi
    # vLLM's faster loader: fastsafetensors reads each file straight into GPU memory (one file's
    # worth at a time: less KV cache, so the buffer fits), the reload included.
    "$PY" bench/weight_update_8b.py "${common[@]}" --phases warm,cold --label "fastsafetensors" \
      --override "++$engine.vllm_serve_kwargs.load_format=fastsafetensors" \
      --override "++$engine.vllm_serve_kwargs.gpu_memory_utilization=0.7" \
      --output "$OUT/weight_update_8b_fastsafetensors.json" 2>&1 | tee "$OUT/weight_update_8b_fastsafetensors.txt" || true
    ;;
  loaders8b)
    # vLLM's multi-thread safetensors loader (every file read by its own thread), the reload included.
    for _ in $(seq 600); do [ -f /tmp/ng-ckpt/.done ] && break; sleep 1; done
    engine="policy_model.responses_api_models.local_vllm_model"
    cat /tmp/ng-ckpt/A/*.safetensors /tmp/ng-ckpt/B/*.safetensors > /dev/null
    "$PY" bench/weight_update_8b.py --config resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml \
      --config responses_api_models/local_vllm_model/configs/gpu_dense_8b_weights.yaml \
      --checkpoint-a /tmp/ng-ckpt/A --checkpoint-b /tmp/ng-ckpt/B --updates 5 --phases warm --label "multi-thread loader" \
      --override "++$engine.vllm_serve_kwargs.model_loader_extra_config={enable_multithread_load:true,num_threads:8}" \
      --output "$OUT/weight_update_8b_multithread.json" 2>&1 | tee "$OUT/weight_update_8b_multithread.txt" || true
    ;;
  pushipc8b)
    for _ in $(seq 600); do [ -f /tmp/ng-ckpt/.done ] && break; sleep 1; done
    [ -f /tmp/ng-ckpt/.done ] || { echo "no checkpoints: run the ckpt8b step first" >&2; exit 2; }
    "$PY" bench/weight_push.py --transfer ipc \
      --config resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml \
      --config responses_api_models/local_vllm_model/configs/gpu_dense_8b_push_ipc.yaml \
      --checkpoint-a /tmp/ng-ckpt/A --checkpoint-b /tmp/ng-ckpt/B --rounds "${2:-6}" --label "8B, colocated" \
      --override "++example_single_tool_call_simple_agent.responses_api_agents.simple_agent.num_workers=4" \
      --output "$OUT/weight_push_ipc_8b.json" 2>&1 | tee "$OUT/weight_push_ipc_8b.txt" || true
    ;;
  delta8b)
    for _ in $(seq 600); do [ -f /tmp/ng-ckpt/.done ] && break; sleep 1; done
    [ -f /tmp/ng-ckpt/.done ] || { echo "no checkpoints: run the ckpt8b step first" >&2; exit 2; }
    rm -rf /tmp/ng-ckpt/B  # the disk holds A, B2 and the delta (about 49 GB with B)
    "$PY" bench/make_random_checkpoint.py --changed-from /tmp/ng-ckpt/A --fraction 0.02 --seed 7 \
      --out /tmp/ng-ckpt/B2 --delta-out /tmp/ng-ckpt/D2 --report "$OUT/delta_checkpoints.jsonl"
    "$PY" bench/weight_delta.py \
      --config resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml \
      --config responses_api_models/local_vllm_model/configs/gpu_dense_8b_weights.yaml \
      --checkpoint-a /tmp/ng-ckpt/A --checkpoint-b /tmp/ng-ckpt/B2 --delta /tmp/ng-ckpt/D2 --rounds "${2:-5}" \
      --label "8B delta 2%" \
      --override "++example_single_tool_call_simple_agent.responses_api_agents.simple_agent.num_workers=4" \
      --output "$OUT/weight_delta_8b.json" 2>&1 | tee "$OUT/weight_delta_8b.txt" || true
    ;;
  pushnccl8b)
    for _ in $(seq 600); do [ -f /tmp/ng-ckpt/.done ] && break; sleep 1; done
    [ -f /tmp/ng-ckpt/.done ] || { echo "no checkpoints: run the ckpt8b step first" >&2; exit 2; }
    "$PY" bench/weight_push.py --transfer nccl --trainer-gpu 0 --engine-gpu 1 \
      --config resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml \
      --config responses_api_models/local_vllm_model/configs/gpu_dense_8b_push_nccl.yaml \
      --checkpoint-a /tmp/ng-ckpt/A --checkpoint-b /tmp/ng-ckpt/B --rounds "${2:-6}" --label "8B, GPU 0 -> GPU 1" \
      --override "++example_single_tool_call_simple_agent.responses_api_agents.simple_agent.num_workers=4" \
      --output "$OUT/weight_push_nccl_8b.json" 2>&1 | tee "$OUT/weight_push_nccl_8b.txt" || true
    ;;
  trlsync)
    "$PY" bench/trl_nemo_gym.py --script "${TRL_SCRIPT:-/tmp/ng-trl/grpo_nemo_gym.py}" --trl-sync \
      --train-steps "${2:-20}" --temperature "${TEMPERATURE:-2.0}" --trainer-gpu 0 --engine-gpu 1 \
      --output "$OUT/trl_grpo_nccl_2gpu.json" > "$OUT/trl_grpo_nccl_2gpu.txt" 2>&1 || echo "trlsync failed: $?"
    tail -n 40 "$OUT/trl_grpo_nccl_2gpu.txt"
    ;;
  ckptmoe)
    CKPY="$PY"; [ -x "$CKPY" ] || CKPY=python3
    mkdir -p /tmp/ng-models /tmp/ng-ckpt
    "$CKPY" ng_cli/toolchain/tiny_model.py --experts 16 --out /tmp/ng-models/tiny-moe > /dev/null
    rm -f "$OUT/moe_checkpoints.jsonl"
    for spec in moeA:1 moeB:2; do  # several files each (0.5 MB shards), as a real checkpoint has
      "$CKPY" bench/make_random_checkpoint.py --config-dir /tmp/ng-models/tiny-moe --out "/tmp/ng-ckpt/${spec%%:*}" \
        --seed "${spec##*:}" --shard-gb 0.0005 --report "$OUT/moe_checkpoints.jsonl"
    done
    touch /tmp/ng-ckpt/.moe-done
    ;;
  eff28)
    mkdir -p /tmp/ng-models
    "$PY" ng_cli/toolchain/tiny_model.py --arch llama3-8b --out /tmp/ng-models/llama3-8b-shape > /dev/null
    common=(--config responses_api_models/local_vllm_model/configs/gpu_dense_8b_dummy.yaml --stack
            --concurrency 256 1024 --waves "${WAVES:-2}" --rounds "${ROUNDS:-3}" --max-tokens 128 --agent-workers 4
            --set return_token_id_information=true)
    CUDA_VISIBLE_DEVICES=0 "$PY" bench/engine_efficiency.py "${common[@]}" \
      --tool-rows resources_servers/example_single_tool_call/data/example.jsonl \
      --paths direct model stack tools_direct tools_direct_strict tools_stack --tools-at 256 \
      --out "$OUT/efficiency_8b_token_ids.json" > "$OUT/efficiency_8b_token_ids.txt" 2>&1 &
    first=$!
    # GPU 1, its own compile cache (two engines compiling into one cache at once is not safe).
    CUDA_VISIBLE_DEVICES=1 VLLM_CACHE_ROOT=/tmp/vllm-cache-gpu1 "$PY" bench/engine_efficiency.py "${common[@]}" \
      --set return_generation_log_probs=false --paths direct stack \
      --out "$OUT/efficiency_8b_token_ids_no_logprobs.json" > "$OUT/efficiency_8b_token_ids_no_logprobs.txt" 2>&1 || true
    wait "$first" || true
    tail -n 14 "$OUT/efficiency_8b_token_ids.txt" "$OUT/efficiency_8b_token_ids_no_logprobs.txt"
    ;;
  moe28)
    for _ in $(seq 300); do [ -f /tmp/ng-ckpt/.moe-done ] && break; sleep 1; done
    moe=(--checkpoint-a /tmp/ng-ckpt/moeA --checkpoint-b /tmp/ng-ckpt/moeB)
    "$PY" bench/moe_dp_ep.py --mode external_lb "${moe[@]}" --soak-s "${SOAK_S:-120}" \
      --output "$OUT/moe_dp2_ep2_external_lb.json" > "$OUT/moe_dp2_ep2_external_lb.txt" 2>&1 || true
    "$PY" bench/moe_dp_ep.py --mode internal_lb "${moe[@]}" --phases "${INTERNAL_PHASES:-ep,rollouts,update}" \
      --output "$OUT/moe_dp2_ep2_internal_lb.json" > "$OUT/moe_dp2_ep2_internal_lb.txt" 2>&1 || true
    tail -n 5 "$OUT"/moe_dp2_ep2_*.txt
    ;;
  tp2)
    # TP 2 as it crashed on 2026-11-26 (CUBLAS_STATUS_INTERNAL_ERROR after an illegal memory access in
    # vLLM's profile run): `tp2` alone runs the default; `tp2 NAME KEY: VALUE ...` adds serve kwargs
    # (`tp2 efficiency_8b_tp2_no_custom_ar disable_custom_all_reduce: true`: NCCL all-reduce only).
    "$PY" ng_cli/toolchain/tiny_model.py --arch llama3-8b --out /tmp/ng-models/llama3-8b-shape > /dev/null
    name="${2:-efficiency_8b_tp2}"
    extra=""; for kv in "${@:3}"; do extra="$extra, $kv"; done
    "$PY" bench/engine_efficiency.py --config responses_api_models/local_vllm_model/configs/gpu_dense_8b_dummy.yaml \
      --set num_gpus=2 --set "vllm_serve_kwargs={tensor_parallel_size: 2$extra}" --set return_token_id_information=true \
      --paths direct --concurrency 256 1024 --waves "${WAVES:-2}" --rounds "${ROUNDS:-2}" --max-tokens 128 \
      --out "$OUT/$name.json" 2>&1 | tail -n 12 | tee "$OUT/$name.txt"
    ;;
  issue41a)
    # Issue 41 on two GPUs, first part: the NCCL push at 8B, then TP 2 as it crashed and without
    # vLLM's custom all-reduce (the suspected cause).
    for part in ckpt8b pushnccl8b; do
      echo "== $part $(date +%T)"; bash bench/gpu_session.sh "$part" || echo "$part failed: $?"
    done
    echo "== tp2 default $(date +%T)"
    WAVES=1 ROUNDS=1 bash bench/gpu_session.sh tp2 efficiency_8b_tp2 || echo "tp2 failed: $?"
    echo "== tp2 without custom all-reduce $(date +%T)"
    WAVES=1 ROUNDS=1 bash bench/gpu_session.sh tp2 efficiency_8b_tp2_no_custom_ar "disable_custom_all_reduce: true" \
      || echo "tp2 failed: $?"
    ;;
  issue28)
    for part in ckptmoe eff28 moe28 tp2; do
      echo "== $part $(date +%T)"; bash bench/gpu_session.sh "$part" || echo "$part failed: $?"
    done
    ;;
  issue41b)
    # Issue 41's rest on two GPUs, in the issue's order: the EP refit proof (files check, probes that
    # tell A from B, an expert-only change, a 5-minute soak), TP 2 with the allreduce fusion off
    # (the plan's own choice where multicast is off), then the 8B delta from disk (one GPU).
    for part in ckptmoe; do bash bench/gpu_session.sh "$part" || echo "$part failed: $?"; done
    echo "== moe28 $(date +%T)"
    SOAK_S="${SOAK_S:-300}" INTERNAL_PHASES="${INTERNAL_PHASES:-ep,refit,update}" bash bench/gpu_session.sh moe28 \
      || echo "moe28 failed: $?"
    echo "== tp2 $(date +%T)"
    WAVES=1 ROUNDS=1 bash bench/gpu_session.sh tp2 efficiency_8b_tp2_fusion_off || echo "tp2 failed: $?"
    for part in ckpt8b delta8b; do
      echo "== $part $(date +%T)"; bash bench/gpu_session.sh "$part" || echo "$part failed: $?"
    done
    ;;
  issue41c)
    # TRL's trainer on two GPUs first (issue 41 step 4), then issue41b.
    echo "== trlsync $(date +%T)"; bash bench/gpu_session.sh trlsync "${TRL_STEPS:-20}" || echo "trlsync failed: $?"
    echo "== issue41b $(date +%T)"; bash bench/gpu_session.sh issue41b || echo "issue41b failed: $?"
    ;;
  issue41d)
    # What issue41c left (2026-11-28): TRL's 20 steps (token_exact on now), the MoE updates with
    # rollouts in flight (the load phase now updates 1 s into the collection), the 8B delta.
    echo "== trlsync $(date +%T)"; bash bench/gpu_session.sh trlsync "${TRL_STEPS:-20}" || echo "trlsync failed: $?"
    echo "== moe load $(date +%T)"; bash bench/gpu_session.sh ckptmoe || echo "ckptmoe failed: $?"
    "$PY" bench/moe_dp_ep.py --mode external_lb --checkpoint-a /tmp/ng-ckpt/moeA --checkpoint-b /tmp/ng-ckpt/moeB \
      --phases ep,load --output "$OUT/moe_dp2_ep2_external_lb_load.json" > "$OUT/moe_dp2_ep2_external_lb_load.txt" 2>&1 \
      || echo "moe load failed: $?"
    tail -n 3 "$OUT/moe_dp2_ep2_external_lb_load.txt"
    for part in ckpt8b delta8b; do
      echo "== $part $(date +%T)"; bash bench/gpu_session.sh "$part" || echo "$part failed: $?"
    done
    ;;
  bg)
    # setsid: the step outlives the device call that starts it (while the machine stays warm).
    mkdir -p /tmp/ng-results /tmp/ng-bg
    OUT=/tmp/ng-results setsid nohup bash -c 'bash bench/gpu_session.sh "$@" > "/tmp/ng-bg/$1.log" 2>&1; \
      echo "exit $?" >> "/tmp/ng-bg/$1.log"; touch "/tmp/ng-bg/$1.done"' bg "${@:2}" < /dev/null > /dev/null 2>&1 &
    echo "started ${2:?step} in the background: /tmp/ng-bg/$2.log"
    ;;
  poll)
    # Wait up to SECONDS while any background step runs; then its tail, and everything it wrote
    # so far into $OUT: the JSON records as they are, the rest (logs) in one results.tgz.
    limit="${2:-540}"
    shopt -s nullglob
    for _ in $(seq "$limit"); do
      running=0
      for log in /tmp/ng-bg/*.log; do [ -f "${log%.log}.done" ] || running=1; done
      [ "$running" = 0 ] && break
      sleep 1
    done
    for log in /tmp/ng-bg/*.log; do
      echo "== $log: $([ -f "${log%.log}.done" ] && echo finished || echo running)"; tail -n 30 "$log"
    done
    nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader
    cp /tmp/ng-results/*.json "$OUT/" 2>/dev/null || true
    tar czf "$OUT/results.tgz" -C /tmp ng-results ng-bg 2>/dev/null || true
    ;;
  *)
    echo "unknown step $step" >&2
    exit 2
    ;;
esac
