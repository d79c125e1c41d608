"""botocore's data loader, minus two costs of every client creation (~40 ms of a cold start).

Before loading a service's model, botocore checks that the service exists by listing
every service it ships: ~430 directories, each listed and probed, once per model type
(a client loads two: ``service-2`` and ``endpoint-rule-set-1``). That is ~25 ms of
every cold start, for a list only used to word the error about an unknown service.
:class:`ServiceLoader` looks up the service's latest API version in the service's own
directory instead, and goes through botocore's listing only when that finds nothing,
so an unknown service still raises botocore's own ``UnknownServiceError``. botocore's
maintainers propose the same change upstream (boto/botocore#3687).

And botocore parses its JSON files into ``OrderedDict`` objects, which halves the speed
of ``json.loads``: ~15 ms per cold start for ``endpoints.json`` (1.2 MB) and the
service's models. :class:`PlainJSONFileLoader` parses them into plain dicts, which keep
the files' order too; botocore builds its own ordered structures from them.

The data loaded is botocore's, unchanged (tested against botocore's loader).
"""

from __future__ import annotations

import contextlib
import gzip
import json
from pathlib import Path
from typing import Any

import botocore.session
from botocore.exceptions import DataNotFoundError
from botocore.loaders import ExtrasProcessor, JSONFileLoader, Loader, create_loader, instance_cache

#: botocore's data files: plain or gzipped JSON, tried in this order (as botocore does).
_SUFFIXES = ((".json", False), (".json.gz", True))


class PlainJSONFileLoader(JSONFileLoader):
    def load_file(self, file_path: str) -> Any:
        for suffix, gzipped in _SUFFIXES:
            path = Path(file_path + suffix)
            if path.is_file():
                payload = gzip.decompress(path.read_bytes()) if gzipped else path.read_bytes()
                return json.loads(payload.decode("utf-8"))
        return None


class ServiceLoader(Loader):
    @instance_cache  # as botocore caches its own
    def load_service_model(self, service_name: str, type_name: str, api_version: str | None = None) -> Any:
        try:
            version = api_version or self.determine_latest_version(service_name, type_name)
            model = self.load_data(f"{service_name}/{version}/{type_name}")
        except DataNotFoundError:
            # Unknown service or version: botocore's own path, for botocore's own error.
            return super().load_service_model(service_name, type_name, api_version)
        extras = []  # botocore's "-extras" files, merged as its own loader does
        for extras_type in self.extras_types:
            with contextlib.suppress(DataNotFoundError):
                extras.append(self.load_data(f"{service_name}/{version}/{type_name}.{extras_type}-extras"))
        ExtrasProcessor().process(model, extras)
        return model


def install_service_loader(session: botocore.session.Session) -> None:
    """Give ``session`` a :class:`ServiceLoader` reading with :class:`PlainJSONFileLoader`, with
    the search paths botocore would use (its own data, ``~/.aws/models``, ``AWS_DATA_PATH``)."""
    paths = create_loader(session.get_config_variable("data_path")).search_paths
    loader = ServiceLoader(
        extra_search_paths=paths, file_loader=PlainJSONFileLoader(), include_default_search_paths=False
    )
    session.register_component("data_loader", loader)
