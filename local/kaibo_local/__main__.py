"""``python -m kaibo_local``: start the local stack (see kaibo_local.stack)."""

from kaibo_local.stack import main

raise SystemExit(main())
