# Staging shared by the H200 scripts (sourced: `. bench/h200/stage.sh`, from the checkout's root).
# The device machines have python3 with torch but no network, no package index and no asv: asv
# and its small dependencies come as wheels carried in .whl (../shared/tools/device-wheels.sh),
# vLLM 0.33 as the offline bundle carried in .vllm-offline/{a,b,c} (one part per call: a call
# carries at most 64 MiB). Sourcing sets the environment every script needs: NVLink multicast
# off (a shared host), unbuffered output, pip that reaches nothing; `py` (PYTHON, default
# python3), `step` (a timestamped heading) and `elapsed T0` (seconds since T0, a
# `date +%s.%N`). The functions stage the rest on demand:
#   stage_checkout      this checkout on PYTHONPATH
#   stage_asv           asv from the carried wheels into /tmp/site (when not importable), and
#                       this checkout and /tmp/site on PYTHONPATH
#   stage_pth [DIR...]  the same (and DIR...) in a .pth of python3's site-packages, for the
#                       processes asv starts without PYTHONPATH (FWDASV_NO_PTH=1: none)
#   stage_unpack PART   unpack the carried part(s) of the vLLM bundle into /tmp/vsite
#   stage_vllm          source the carried bundle's stage.sh (c, b or a), or, with none
#                       carried, take the already unpacked /tmp/vsite; sets VLLM_OFFLINE_HOME
#   stage_vllm_run LOGS [DIR...]
#                       what a vLLM measuring run needs: stage_vllm (refused in one line unless
#                       all three parts are unpacked), stage_asv, stage_pth over the site (and
#                       DIR...), FWDASV_MODEL_DIR (the bundle's models) and FWDASV_LOG_DIR=LOGS
#   stage_vllm_project REPO PROJECT
#                       a local vLLM history in REPO (make_vllm_history.py over the staged
#                       site's Python, once) and its `fwdasv init --vllm` project in PROJECT
#                       (once); `commits`: its hashes, oldest first; status 2 when not made
# Part a with this checkout is over 64 MiB: bench/h200/split_a.sh splits it in two here and
# joins it there over two calls (carry .vllm-offline/a1, then a2), before parts b and c.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS= PIP_CONFIG_FILE=/dev/null
export PIP_DISABLE_PIP_VERSION_CHECK=1
py=${PYTHON:-python3}
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
elapsed() { awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $1}"; }  # seconds since $1 (date +%s.%N)

stage_checkout() {
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
}

stage_asv() {
  if ! $py -c 'import asv' 2>/dev/null; then
    local wheels
    wheels=$(ls .whl/*.whl .whl-dev/*.whl 2>/dev/null | head -200)
    if [ -z "$wheels" ]; then
      echo "no asv and no .whl/*.whl: carry .whl (../shared/tools/device-wheels.sh)"
      return 2
    fi
    # shellcheck disable=SC2086
    $py -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site $wheels || return 2
  fi
  export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
}

stage_pth() {
  if [ -n "${FWDASV_NO_PTH:-}" ]; then
    echo "FWDASV_NO_PTH set: no .pth written (PYTHONPATH only; fwdasv's envs link it)"
    return 0
  fi
  local site_dir
  site_dir=$($py -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if printf '%s\n' "$PWD" /tmp/site "$@" > "$site_dir/zz-fwdasv-checkout.pth" 2>/dev/null; then
    echo "wrote $site_dir/zz-fwdasv-checkout.pth ($PWD, /tmp/site${*:+, $*})"
  else
    echo "cannot write into $site_dir: relying on PYTHONPATH (fwdasv's envs link it)"
  fi
}

stage_unpack() {
  bash ".vllm-offline/${1:?bundle part: a | b | c}/stage.sh"
}

stage_vllm() {
  local part site=${VLLM_SITE:-/tmp/vsite}
  # The bundle's stage.sh sets B, S and missing at its top level: local here, so a caller's
  # own (sparse_bisect.sh's S, its output folder) survive the source.
  local B S missing
  if [ -z "${VLLM_OFFLINE_HOME:-}" ]; then
    for part in c b a; do
      # shellcheck disable=SC1090
      if [ -f ".vllm-offline/$part/stage.sh" ]; then source ".vllm-offline/$part/stage.sh"; break; fi
    done
  fi
  if [ -z "${VLLM_OFFLINE_HOME:-}" ] && [ -f "$site/.c-done" ]; then  # unpacked by an earlier call
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
    export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_OFFLINE_HOME=$site/offline
  fi
  [ -n "${VLLM_OFFLINE_HOME:-}" ]
}

stage_vllm_run() {
  local logs=${1:?LOGS} site=${VLLM_SITE:-/tmp/vsite}
  shift
  stage_vllm
  if [ ! -f "$site/vllm/_C_stable_libtorch.abi3.so" ] || [ -z "${VLLM_OFFLINE_HOME:-}" ]; then
    echo "the offline bundle is not staged in $site: unpack parts a and b by earlier calls" \
      "(bench/h200/split_a.sh join with a1, then a2; bash .vllm-offline/b/stage.sh), carry c"
    return 2
  fi
  stage_asv || return 2
  stage_pth "$site" "$@"
  export FWDASV_MODEL_DIR=$VLLM_OFFLINE_HOME/models FWDASV_LOG_DIR=$logs
}

stage_vllm_project() {
  local repo=${1:?REPO} project=${2:?PROJECT} site=${VLLM_SITE:-/tmp/vsite}
  if [ ! -f "$repo.commits" ]; then  # make_vllm_history.py lists the commits beside REPO
    step "a local vLLM history from $site's Python (bench/h200/make_vllm_history.py)"
    $py bench/h200/make_vllm_history.py --base "$site" --out "$repo" || return 2
  fi
  if [ ! -f "$project/asv.conf.json" ]; then
    step "fwdasv init --vllm (base $site) in $project"
    $py -m fwdasv init --vllm --repo "$repo" --base "$site" --dir "$project" || return 2
  fi
  mapfile -t commits < <(cut -d' ' -f1 "$repo.commits")
}
