"""Write the catalogue of attnlab's own presets that the package ships (``src/attnlab/app/catalogue.json``): the
file a new cache directory's first ``attnlab list`` and ``attnlab show`` read where no plugin is installed.

Run it (``make catalogue``) after editing any source file of attnlab: ``tests/app/test_startup.py`` fails while the
shipped catalogue was written from other sources or lists other presets than the registry.
"""

from attnlab.app.catalogue import write_shipped

if __name__ == "__main__":
    print(f"wrote {write_shipped()}")
