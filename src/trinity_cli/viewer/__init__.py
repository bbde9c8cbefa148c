"""The run viewer: `trinity inspect --serve` (a local page over TRINITY_HOME/runs) and
`trinity inspect RUN --html DIR` (the same pages as a static folder).

    opened.py       one run opened: its record and files, read when a page first needs them
    shape.py        what pages share: tables as dicts, trimmed transcripts, the scrub
    pages.py        every page by key (runs list, ask, compare); bench_page.py and
                    evolve_page.py the pages of those runs: plain functions, run dir -> dict
    export.py       the static folder (pages as data/KEY.js scripts)
    web.py          the FastAPI app and its server (the only module here that imports them)
    assets/         index.html, viewer.js, viewer.css: the page itself, no build step

Model text is untrusted: the page inserts it as text only (viewer.js), and every page is
scrubbed of secrets and home directories before it leaves the process (shape.scrub).
"""
