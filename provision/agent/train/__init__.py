"""HOST side of `provision train`: runs the user's command detached from the SSH session, samples
the machine while it runs, and answers the controller's questions about runs.

    rundir.py      where a run lives (<data_dir>/runs/<run_id>/) and its state.json
    procs.py       /proc: a run's processes, their CPU, ending them
    codesync.py    the shipped code: content-hash manifest, tar in, copy into the run
    gpu.py         per-GPU samples (NVML, else nvidia-smi)
    sampler.py     one sample of the machine and the run's process tree per interval
    supervisor.py  the detached process that starts the command, samples, records the exit
    idle.py        stop paying for idle GPUs: wait for DURATION of idleness, run stop_command
    summary.py     samples + instrumentation + log -> the profile the controller diagnoses
    commands.py    the agent commands (train_start, train_list, train_follow, ...)
    instrument/    the sitecustomize.py put on the run's PYTHONPATH (--no-instrument: off)

Python 3.8+, stdlib only, no controller imports.
"""
