"""``python -m kaibo_local``: start the local stack (see kaibo_local.stack);
``python -m kaibo_local reset``: empty its data folder (``make reset``);
``python -m kaibo_local reindex-semantic``: place its memories by meaning (``make reindex-semantic``);
``python -m kaibo_local repair-index``: repair its term index (``make repair-index``)."""

import sys

from kaibo_local.stack import main, reset_command

if sys.argv[1:] == ["reset"]:
    raise SystemExit(reset_command())
if sys.argv[1:] == ["reindex-semantic"]:
    from kaibo_local.reindex import reindex_command

    raise SystemExit(reindex_command())
if sys.argv[1:] == ["repair-index"]:
    from kaibo_local.reindex import repair_command

    raise SystemExit(repair_command())
if sys.argv[1:]:
    sys.stderr.write("usage: python -m kaibo_local [reset | reindex-semantic | repair-index]\n")
    raise SystemExit(2)
raise SystemExit(main())
