"""Traceback and warning hygiene for provision train's sitecustomize.py (its sibling on the run's
PYTHONPATH): the wrapper frames of the instrumentation's files are cut from the user's
tracebacks and not counted in a warning's `stacklevel`, so both name the user's code."""

import os
import sys

# the instrumentation's own files: sitecustomize.py and its siblings in this folder
_HERE = os.path.dirname(os.path.abspath(__file__))
OUR_FILES = frozenset(os.path.join(_HERE, name) for name in
                      ("sitecustomize.py", "provision_batches.py", "provision_hygiene.py"))  # supervisor.INSTRUMENT_FILES


def ours(frame):
    return frame.f_code.co_filename in OUR_FILES


def without_our_frames(exc):
    """The exception (and those it chains) with this file's wrapper frames cut out of its
    traceback: the user's traceback shows their code and torch's, never provision's."""
    seen = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None and ours(tb.tb_frame):
            tb = tb.tb_next
        node = tb
        while node is not None and node.tb_next is not None:
            if ours(node.tb_next.tb_frame):
                node.tb_next = node.tb_next.tb_next
            else:
                node = node.tb_next
        try:
            e.__traceback__ = tb
        except Exception:
            pass
        todo.extend([e.__cause__, e.__context__] + list(getattr(e, "exceptions", None) or []))
    return exc


def install_excepthooks():
    prev = sys.excepthook

    def excepthook(kind, value, tb):
        try:
            tb = without_our_frames(value).__traceback__
        except Exception:
            pass
        return prev(kind, value, tb)

    sys.excepthook = excepthook
    try:
        import threading as _threading

        prev_thread = _threading.excepthook

        def thread_hook(args):
            try:
                without_our_frames(args.exc_value)
                args = _threading.ExceptHookArgs((args.exc_type, args.exc_value, args.exc_value.__traceback__,
                                                  args.thread))
            except Exception:
                pass
            return prev_thread(args)

        _threading.excepthook = thread_hook
    except Exception:
        pass


def install_warn():
    """warnings.warn that does not count this file's wrapper frames in `stacklevel`: torch's
    `stacklevel=2` warnings (GradScaler on a host without CUDA...) name the user's line, not
    provision's sitecustomize.py."""
    import warnings

    orig = warnings.warn

    def warn(message, category=None, stacklevel=1, source=None, *args, **kwargs):
        if not isinstance(stacklevel, int) or stacklevel < 1:
            return orig(message, category, stacklevel, source, *args, **kwargs)
        level = stacklevel
        try:
            frame, real, counted = sys._getframe(1), 0, 0
            while frame is not None and counted < stacklevel:
                real += 1
                if not ours(frame):
                    counted += 1
                if counted < stacklevel:
                    frame = frame.f_back
            if frame is not None:
                level = real
        except Exception:
            pass
        return orig(message, category, level + 1, source, *args, **kwargs)

    warn.__doc__, warn.__wrapped__ = orig.__doc__, orig
    warnings.warn = warn
