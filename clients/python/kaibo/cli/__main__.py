"""``python -m kaibo.cli``: the same as the ``kaibo`` command."""

from __future__ import annotations

from kaibo.cli import main

raise SystemExit(main())
