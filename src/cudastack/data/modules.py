"""Which distribution provides a top-level module whose name is not the distribution's own.

Only names seen in a real wheel's RECORD (the release in the comment, installed in the test
suite's real stacks under ``~/.cache/cudastack-tests``); the project page is the source a reader
can check. A module not listed here has no known provider: PKG017 says so rather than guessing
that the distribution is named like the module. Namespace packages that many distributions share
(``google``, ``nvidia``, ``cuda``, ``opentelemetry``) are left out on purpose: the top-level name
does not decide the distribution.
"""

from __future__ import annotations

MODULE_PROVIDERS: dict[str, tuple[str, ...]] = {
    # module: (distributions that ship it, the usual one first)
    "yaml": ("PyYAML",),  # PyYAML 6.0.4; https://pypi.org/project/PyYAML/
    # opencv-python 5.1's README, "Installation and Usage": four packages, one module, install one
    # (headless for servers); https://github.com/opencv/opencv-python#installation-and-usage
    "cv2": ("opencv-python", "opencv-python-headless", "opencv-contrib-python", "opencv-contrib-python-headless"),
    "sklearn": ("scikit-learn",),  # scikit-learn 1.9.1; https://pypi.org/project/scikit-learn/
    "PIL": ("pillow",),  # pillow 13.0.0; https://pypi.org/project/pillow/
    "attr": ("attrs",),  # attrs 26.1.0 (ships attr and attrs); https://pypi.org/project/attrs/
    "dateutil": ("python-dateutil",),  # python-dateutil 2.9.0.post0; https://pypi.org/project/python-dateutil/
    "dotenv": ("python-dotenv",),  # python-dotenv 1.2.4; https://pypi.org/project/python-dotenv/
    "jwt": ("PyJWT",),  # PyJWT 2.15.1; https://pypi.org/project/PyJWT/
    "zmq": ("pyzmq",),  # pyzmq 27.3.0; https://pypi.org/project/pyzmq/
    "cpuinfo": ("py-cpuinfo",),  # py-cpuinfo 9.0.0; https://pypi.org/project/py-cpuinfo/
    "dns": ("dnspython",),  # dnspython 2.9.2; https://pypi.org/project/dnspython/
    "grpc": ("grpcio",),  # grpcio 1.85.3; https://pypi.org/project/grpcio/
    "markdown_it": ("markdown-it-py",),  # markdown-it-py 4.3.0; https://pypi.org/project/markdown-it-py/
    "pythonjsonlogger": ("python-json-logger",),  # 4.2.0; https://pypi.org/project/python-json-logger/
    "rpds": ("rpds-py",),  # rpds-py 2026.9.1; https://pypi.org/project/rpds-py/
    "z3": ("z3-solver",),  # z3-solver 4.15.4.0; https://pypi.org/project/z3-solver/
    "Cryptodome": ("pycryptodomex",),  # pycryptodomex 3.24.2; https://pypi.org/project/pycryptodomex/
}
