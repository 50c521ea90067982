"""Controller side of `provision train`: what code to ship, starting and following runs on
hosts, diagnosing and reporting them. The host side is provision/agent/train/.

    gitignore.py   .gitignore rules for folders that are not git repositories
    codefiles.py   the files of --dir (git ls-files, else .gitignore), hashes, size guard
    launch.py      the Python API: start / follow / stop / list / summarize a run on a host
    diagnosis.py   findings from a run's profile (input_bound, io_bound, no_amp, ...)
    report.py      the --json shape, the report document, history
    render.py      the train report's own layout (Markdown, HTML)
    report_section.py  registers that layout and its compared figures with the report's sections
    live.py        the one-screen rich view while following
"""

from provision.train import report_section as _report_section  # noqa: F401 - registers the train section

__all__: list[str] = []
