"""The cheap test before the loading-call words in the native-loads scan (``_CALL_PIECES``) never
drops a file the words and the pattern would keep: compared on every Python file of the standard
library and of this interpreter's site-packages."""

from __future__ import annotations

import glob
import sysconfig

from cudastack.env.native_loads import _CALL, _CALL_PIECES, _CALL_WORDS


def _kept(raw: bytes) -> bool:
    return any(w in raw for w in _CALL_WORDS) and _CALL.search(raw) is not None


def test_each_word_holds_a_piece() -> None:
    assert all(any(p in w for p in _CALL_PIECES) for w in _CALL_WORDS)


def test_the_pieces_keep_every_file_the_words_keep() -> None:
    paths = sorted(glob.glob(sysconfig.get_paths()["stdlib"] + "/**/*.py", recursive=True))
    paths += sorted(glob.glob(sysconfig.get_paths()["purelib"] + "/**/*.py", recursive=True))
    kept = 0
    for path in paths:
        with open(path, "rb") as fh:
            raw = fh.read()
        if _kept(raw):
            kept += 1
            assert any(p in raw for p in _CALL_PIECES), path
    assert len(paths) > 1000 and kept > 5  # ctypes and importlib themselves make such calls
