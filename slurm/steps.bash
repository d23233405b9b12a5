# ---- steps and requeue (slurm/steps.bash, the same in every template) ----
# GRACE seconds before the time limit Slurm sends SIGTERM to this batch shell alone
# (#SBATCH --signal=B:TERM@GRACE). on_term passes it on at once to the tasks of the running
# step: `scancel --signal=TERM $SLURM_JOB_ID` signals every step's tasks but not this shell
# (srun itself would turn a SIGTERM into SIGKILL of its tasks: "forcing job termination").
# Each rank stops at its next tile or shard, flushes what it finished and exits 143.
# requeue_or_exit then runs `scontrol requeue`: the job goes back to the queue with the same
# id (SLURM_RESTART_COUNT + 1, logs appended), and the next run finishes the output through
# output.exists: auto. Exit status of this script: 0 done; 143 stopped and requeued (or not
# requeued: the job was cancelled, max_restarts reached, or scontrol refused; submit the
# script again); anything else: the failing step's status (shardmill's: 2 configuration,
# 3 input, 4 I/O, 5 a limit).
stop_requested=0
step_pid=""
step_srun=0
step_rc=0

# forward_term: SIGTERM to the running step: its tasks through Slurm, a local command directly.
forward_term() {
    if [[ -z "$step_pid" ]]; then
        return 0
    fi
    if ((step_srun)); then
        scancel --quiet --signal=TERM "$SLURM_JOB_ID" 2>/dev/null || true
    else
        kill -TERM "$step_pid" 2>/dev/null || true
    fi
}

on_term() {
    stop_requested=1
    echo "shardmill-slurm: SIGTERM (the time limit is near, or scancel): stopping the step" >&2
    forward_term
}
trap on_term TERM

# run_step CMD...: CMD in the background, since bash runs a trap only once a foreground command
# ends; waits until CMD ends (a trap interrupts `wait`, so wait again) and sets step_rc.
run_step() {
    step_rc=0
    if ((stop_requested)); then
        step_rc=143
        return
    fi
    step_srun=0
    if [[ "$1" == srun ]]; then
        step_srun=1
    fi
    "$@" &
    step_pid=$!
    if ((stop_requested)); then # SIGTERM came before the step existed: end srun itself
        kill -TERM "$step_pid" 2>/dev/null || true
    fi
    wait "$step_pid" || step_rc=$?
    while ((step_rc > 128)) && kill -0 "$step_pid" 2>/dev/null; do
        step_rc=0
        wait "$step_pid" || step_rc=$?
    done
    step_pid=""
}

requeue_or_exit() {
    local restarts="${SLURM_RESTART_COUNT:-0}" state
    # scancel sends SIGTERM too, but marks the job CANCELLED first: only a running job (the
    # --signal before the time limit, or scancel --signal=TERM --batch) comes back
    state=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | grep -o 'JobState=[A-Z_]*') || true
    state="${state#JobState=}"
    if [[ "$state" != RUNNING ]]; then
        echo "shardmill-slurm: stopped by SIGTERM; the job is ${state:-unknown} (scancel?):" \
            "not requeued" >&2
        exit 143
    fi
    if ((restarts >= max_restarts)); then
        echo "shardmill-slurm: error: stopped by SIGTERM after ${restarts} restarts (at most" \
            "${max_restarts}): not requeued; submit the script again to finish the output" >&2
        exit 143
    fi
    echo "shardmill-slurm: stopped by SIGTERM: scontrol requeue ${SLURM_JOB_ID}" \
        "(restart $((restarts + 1)) of at most ${max_restarts})"
    if ! scontrol requeue "$SLURM_JOB_ID"; then
        echo "shardmill-slurm: error: scontrol requeue ${SLURM_JOB_ID} failed: submit the" \
            "script again to finish the output" >&2
    fi
    exit 143
}

# after_step: a step stopped by SIGTERM (143) requeues the job; another failure ends it with
# the step's status.
after_step() {
    if ((step_rc == 143 || (stop_requested && step_rc != 0))); then
        requeue_or_exit
    fi
    if ((step_rc != 0)); then
        exit "$step_rc"
    fi
}
