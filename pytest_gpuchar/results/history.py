"""The history store: every run of every board, in a real database, behind one interface.

``open_history(target)`` takes a file path (SQLite: the default for one machine; parent
directories created; WAL journal and a busy timeout, writers take the write lock at the start
of their transaction, so several local writers queue rather than fail) or a database URL
(``sqlite:///PATH``, ``postgresql://...``, ``postgresql+psycopg://...``: PostgreSQL through
psycopg 3, for a fleet sharing one server). SQLAlchemy Core builds every statement, so one
code path serves both backends. The schema is created on first use, with a schema-version
table so that it can evolve.

Append-only: ``History.record`` adds the runs of one report (one run per board, see
history_rows) in ONE transaction - a writer killed half-way leaves nothing of that report -
and recording the same run again is a no-op (a unique hash of the board, the report's meta and
the board's results: a nightly.json and its own report are one run). There is no update or
delete.

Queries: ``previous`` (a board's latest run as a report-shaped dict, what the nightly compares
with), ``runs``, ``series`` (one figure over time), ``fleet`` (one figure across the boards of
a model), ``boards``, ``export_rows``.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import difflib
import time
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import event

from .history_rows import (FLEET_STATUSES, UNKNOWN_BOARD, HistoryError, fleet_of, iso,
                           parse_date, result_dict, result_row, slug, split)

__all__ = ["History", "HistoryError", "Recorded", "UNKNOWN_BOARD", "open_history",
           "SCHEMA_VERSION", "FLEET_STATUSES"]

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 60          # how long a SQLite writer waits for another one's transaction
BATCH = 500                  # result rows per INSERT statement
ADVISORY_LOCK = 0x67707563   # PostgreSQL: serialises the schema creation of several writers

metadata = sa.MetaData()
JSON = sa.JSON()
BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

schema_t = sa.Table(
    "gpuchar_schema", metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied", sa.DateTime, nullable=False),
    sa.Column("note", sa.String))

runs_t = sa.Table(
    "gpuchar_runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("recorded", sa.DateTime, nullable=False),      # when the store got it (UTC)
    sa.Column("run_date", sa.DateTime),                      # when the run ended (UTC)
    sa.Column("host", sa.String),
    sa.Column("board", sa.String),                           # GPU UUID; NULL: unknown board
    sa.Column("device_index", sa.Integer),
    sa.Column("device", sa.String),                          # the model: "NVIDIA H200"
    sa.Column("arch", sa.String),
    sa.Column("sm_count", sa.Integer),
    sa.Column("driver", sa.String),
    sa.Column("cuda_driver_api", sa.String),
    sa.Column("cuda_runtime", sa.String),
    sa.Column("ptxas", sa.String),
    sa.Column("nvdisasm", sa.String),
    sa.Column("suite_version", sa.String),
    sa.Column("sm_clock_max_mhz", sa.Double),
    sa.Column("sm_clock_mhz", sa.Double),                    # measured at the start
    sa.Column("sm_clock_end_mhz", sa.Double),                # measured at the end (nightly)
    sa.Column("pytest_exit", sa.Integer),
    sa.Column("nightly_exit", sa.Integer),
    sa.Column("source", sa.String, nullable=False),          # nightly / pytest / import
    sa.Column("doc_kind", sa.String, nullable=False),        # results / nightly
    sa.Column("path", sa.String),                            # the file recorded
    sa.Column("n_results", sa.Integer, nullable=False),
    sa.Column("content_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("meta", JSON))
sa.Index("ix_gpuchar_runs_board_date", runs_t.c.board, runs_t.c.run_date)
sa.Index("ix_gpuchar_runs_device", runs_t.c.device)

results_t = sa.Table(
    "gpuchar_results", metadata,
    sa.Column("id", BIGINT, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("gpuchar_runs.id"), nullable=False),
    sa.Column("key", sa.String, nullable=False),
    sa.Column("arch", sa.String, nullable=False),
    sa.Column("status", sa.String),
    sa.Column("value", sa.Double),
    sa.Column("unit", sa.String),
    sa.Column("spread", sa.Double),
    sa.Column("expected", sa.String),
    sa.Column("deviation", sa.Double),
    sa.Column("allowance", sa.Double),
    sa.Column("noise_rel", sa.Double),
    sa.Column("noise_source", sa.String),
    sa.Column("source", sa.String),
    sa.Column("method", sa.String),
    sa.Column("test", sa.String),
    sa.Column("detail", sa.String),
    sa.Column("data", JSON),
    sa.Column("provenance", JSON),
    sa.Column("extra", JSON))
sa.Index("ix_gpuchar_results_run", results_t.c.run_id)
sa.Index("ix_gpuchar_results_key", results_t.c.key, results_t.c.arch)

RUN_FIELDS = ("id", "run_date", "recorded", "board", "device_index", "device", "arch",
              "sm_count", "driver", "cuda_driver_api", "cuda_runtime", "ptxas", "nvdisasm",
              "suite_version", "host", "sm_clock_max_mhz", "sm_clock_mhz", "sm_clock_end_mhz",
              "pytest_exit", "nightly_exit", "source", "doc_kind", "path", "n_results")
RUN_COLUMNS = [runs_t.c[k] for k in RUN_FIELDS]
EXPORT_FIELDS = ("run_id", "run_date", "board", "device", "host", "driver", "cuda_driver_api",
                 "suite_version", "key", "arch", "value", "unit", "spread", "status",
                 "expected", "deviation", "source", "test")


class Recorded(list):
    """The run ids of one recorded report, one per board (a list of int); `existing` holds
    those that were already in the store (recording a report twice adds nothing)."""

    def __init__(self, ids, existing=()):
        super().__init__(ids)
        self.existing = list(existing)

    @property
    def new(self) -> list[int]:
        return [i for i in self if i not in self.existing]


def _url(target: str) -> tuple[sa.URL, str]:
    """The SQLAlchemy URL of a --history/--db target and its name for messages."""
    if "://" not in target:
        p = Path(target).expanduser()
        if p.is_dir():
            raise HistoryError(f"{target}: is a directory; the history is one database: a file "
                               f"(SQLite, e.g. {p / 'gpuchar-history.sqlite'}) or a database URL")
        return sa.URL.create("sqlite", database=str(p.resolve())), str(target)
    try:
        url = sa.make_url(target)
    except (sa.exc.ArgumentError, ValueError):
        raise HistoryError(f"{target}: not a database URL (sqlite:///PATH, "
                           f"postgresql://USER@HOST/DB)") from None
    name = url.render_as_string(hide_password=True)
    backend = url.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")   # psycopg 3, not psycopg2
    elif backend != "sqlite":
        raise HistoryError(f"{name}: unsupported database {backend!r} (a file path, "
                           f"sqlite:///PATH or postgresql://...)")
    return url, name


def open_history(target: str | Path, *, create: bool = True) -> "History":
    """The history at `target` (see the module docstring). With create=False a SQLite file
    that does not exist is an error (reading commands never create an empty database)."""
    target = str(target or "").strip()
    if not target:
        raise HistoryError("no history database given (a file path or a database URL)")
    url, name = _url(target)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        db = Path(url.database)
        if not db.exists():
            if not create:
                raise HistoryError(f"{name}: no such history database (record a run into it "
                                   f"first, e.g. gpuchar-history import FILE --db {target})")
            try:
                db.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise HistoryError(f"{name}: cannot create its directory: "
                                   f"{e.strerror or e}") from None
    try:
        engine = _engine(url)
    except ImportError as e:
        raise HistoryError(f"{name}: the database driver is not installed ({e}); "
                           f"pip install 'pytest-gpuchar[postgres]'") from None
    h = History(engine, name)
    try:
        h._ensure_schema()
    except BaseException:
        engine.dispose()
        raise
    return h


def _engine(url: sa.URL) -> sa.Engine:
    if url.get_backend_name() != "sqlite":
        return sa.create_engine(url, pool_pre_ping=True)
    engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None      # the transactions are begun below
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        _wal(cur)
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):
        # a writer takes the write lock at BEGIN: a deferred transaction that reads first
        # and writes later cannot wait for another writer (SQLITE_BUSY at once)
        write = conn.get_execution_options().get("gpuchar_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
    return engine


def _wal(cur) -> None:
    """The database in WAL mode (kept in the file: set by the first connection). Switching
    takes an exclusive lock without waiting through the busy timeout: several processes
    opening one fresh file at once got "database is locked" at once, so the switch is tried
    again until the timeout."""
    import sqlite3
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
        try:
            cur.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class History:
    """One history database (see the module docstring); open it with open_history."""

    def __init__(self, engine: sa.Engine, name: str) -> None:
        self.engine = engine
        self.name = name
        self._writer = engine.execution_options(gpuchar_write=True)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"History({self.name!r})"

    @contextlib.contextmanager
    def _errors(self, what: str):
        """Database errors as one HistoryError naming this database."""
        try:
            yield
        except sa.exc.SQLAlchemyError as e:
            orig = getattr(e, "orig", None) or e
            text = " ".join(str(orig).split())[:300]
            raise HistoryError(f"{self.name}: {what}: {type(orig).__name__}: {text}") from e

    # --- schema --------------------------------------------------------------------------------
    def _ensure_schema(self) -> None:
        with self._errors("cannot open the history database"):
            with self.engine.connect() as conn:
                version = self._version(conn)
            if version is None:
                with self._writer.begin() as conn:
                    if conn.dialect.name == "postgresql":
                        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(ADVISORY_LOCK)))
                    if self._version(conn) is None:     # not created by another writer
                        metadata.create_all(conn)
                        conn.execute(schema_t.insert().values(
                            version=SCHEMA_VERSION, applied=_now(),
                            note="gpuchar history: runs, results"))
                    version = self._version(conn)
        if version > SCHEMA_VERSION:
            raise HistoryError(f"{self.name}: written by a newer pytest-gpuchar (history schema "
                               f"{version}, this one reads {SCHEMA_VERSION}): upgrade it")

    @staticmethod
    def _version(conn) -> int | None:
        if not sa.inspect(conn).has_table(schema_t.name):
            return None
        return conn.execute(sa.select(sa.func.max(schema_t.c.version))).scalar()

    # --- writing -------------------------------------------------------------------------------
    def record(self, doc: dict, *, source: str, path: str | None = None,
               nightly_exit: int | None = None) -> Recorded:
        """Record a gpuchar-results.json or nightly.json dict: one run per board, all in one
        transaction. Returns the run ids (one per board); ids already recorded (the same
        report recorded before) are in the result's `existing`."""
        runs = split(doc, source=source, path=path, nightly_exit=nightly_exit,
                     name=path or "report")
        for attempt in range(3):
            try:
                with self._errors(f"cannot record {path or 'the report'}"):
                    return self._insert(runs)
            except HistoryError as e:
                # PostgreSQL: another writer recorded the same report at the same moment;
                # its runs are there now and the next attempt finds them
                if not isinstance(e.__cause__, sa.exc.IntegrityError) or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _insert(self, runs) -> Recorded:
        ids, existing = [], []
        now = _now()
        with self._writer.begin() as conn:
            for run in runs:
                old = conn.execute(sa.select(runs_t.c.id).where(
                    runs_t.c.content_hash == run.columns["content_hash"])).scalar()
                if old is not None:
                    ids.append(old)
                    existing.append(old)
                    continue
                rid = conn.execute(runs_t.insert().values(
                    recorded=now, meta=run.meta, **run.columns)).inserted_primary_key[0]
                common = run.meta.get("provenance")
                rows = [dict(result_row(r, common), run_id=rid) for r in run.results]
                for k in range(0, len(rows), BATCH):
                    conn.execute(results_t.insert(), rows[k:k + BATCH])
                ids.append(rid)
        return Recorded(ids, existing)

    # --- names ---------------------------------------------------------------------------------
    def _distinct(self, column) -> list:
        with self._errors("cannot read"), self.engine.connect() as conn:
            return [v for v in conn.execute(sa.select(column).distinct()).scalars()]

    def resolve_board(self, text: str) -> str | None:
        """A board's UUID from a UUID or an unambiguous prefix ("GPU-fa334b31", "fa334b31");
        "unknown" is the runs of no known board (None). HistoryError if none or several."""
        t = str(text).strip()
        if t.lower() in ("unknown", UNKNOWN_BOARD):
            return None
        boards = [b for b in self._distinct(runs_t.c.board) if b]
        if t in boards:
            return t
        low = t.lower()
        hits = sorted(b for b in boards if b.lower().startswith(low) or
                      b.lower().startswith("gpu-" + low))
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise HistoryError(f"--board {t}: ambiguous in {self.name}, matches "
                               f"{', '.join(hits)}")
        raise HistoryError(f"--board {t}: no such board in {self.name} (boards: "
                           f"{', '.join(sorted(boards)) or 'none'})")

    def resolve_model(self, text: str) -> str:
        """A device name from its name (any case), its directory slug (nvidia-h200) or a part
        of it matching one model only ("H200")."""
        t = str(text).strip()
        models = [m for m in self._distinct(runs_t.c.device) if m]
        exact = [m for m in models if m.lower() == t.lower() or slug(m) == t.lower()]
        hits = exact or [m for m in models if t.lower() in m.lower()]
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise HistoryError(f"--model {t}: ambiguous in {self.name}, matches "
                               f"{', '.join(sorted(hits))}")
        raise HistoryError(f"--model {t}: no such model in {self.name} (models: "
                           f"{', '.join(sorted(models)) or 'none'})")

    def check_key(self, key: str) -> None:
        """HistoryError naming the closest keys when no result has `key`."""
        with self._errors("cannot read"), self.engine.connect() as conn:
            if conn.execute(sa.select(results_t.c.id).where(results_t.c.key == key)
                            .limit(1)).first() is not None:
                return
        close = difflib.get_close_matches(key, self._distinct(results_t.c.key), n=4, cutoff=0.6)
        raise HistoryError(f"{key}: no such result key in {self.name}"
                           + (f" (closest: {', '.join(close)})" if close else ""))

    def _where(self, board=None, model=None, since=None, arch=None) -> list:
        cond = []
        if board is not None:
            uuid = self.resolve_board(board)
            cond.append(runs_t.c.board.is_(None) if uuid is None else runs_t.c.board == uuid)
        if model is not None:
            cond.append(runs_t.c.device == self.resolve_model(model))
        if since is not None:
            cond.append(runs_t.c.run_date >= parse_date(since, "--since"))
        if arch is not None:
            cond.append(sa.exists().where(results_t.c.run_id == runs_t.c.id,
                                          results_t.c.arch == arch))
        return cond

    # --- queries -------------------------------------------------------------------------------
    def runs(self, board=None, model=None, since=None, arch=None) -> list[dict]:
        """Every run (oldest first) matching the filters: its columns, without results."""
        q = sa.select(*RUN_COLUMNS).where(*self._where(board, model, since, arch)).order_by(
            runs_t.c.run_date.asc().nulls_first(), runs_t.c.id)
        with self._errors("cannot read runs"), self.engine.connect() as conn:
            return [_run(row) for row in conn.execute(q)]

    def previous(self, board_uuid: str, arch: str | None = None,
                 before_run: int | None = None) -> dict | None:
        """The board's latest run (by run date; before run `before_run` if given) as a
        report-shaped dict: {"meta", "results", "changes", "run", "date", "exit"} - what
        read_report gives for a nightly.json. None when the board has no such run."""
        try:
            uuid = self.resolve_board(board_uuid)
        except HistoryError as e:
            if "no such board" in str(e):
                return None
            raise
        cond = [runs_t.c.board.is_(None) if uuid is None else runs_t.c.board == uuid]
        if arch is not None:
            cond += self._where(arch=arch)
        with self._errors("cannot read the previous run"), self.engine.connect() as conn:
            if before_run is not None:
                ref = conn.execute(sa.select(runs_t.c.run_date, runs_t.c.id).where(
                    runs_t.c.id == before_run)).first()
                if ref is None:
                    raise HistoryError(f"{self.name}: no run {before_run}")
                cond.append(_before(ref.run_date, ref.id))
            row = conn.execute(sa.select(*RUN_COLUMNS, runs_t.c.meta).where(*cond).order_by(
                runs_t.c.run_date.desc().nulls_last(), runs_t.c.id.desc()).limit(1)).first()
            if row is None:
                return None
            return self._doc(conn, row)

    def earlier(self, board_uuid: str, arch: str | None, doc: dict, n: int) -> list[list[dict]]:
        """The results of the board's up to `n` runs before `doc` (a run previous() or run()
        gave), oldest first: a night's change history (results/gate.py)."""
        out: list[list[dict]] = []
        before = doc["run"]["id"]
        while len(out) < n:
            prev = self.previous(board_uuid, arch, before_run=before)
            if prev is None:
                break
            out.insert(0, prev.get("results") or [])
            before = prev["run"]["id"]
        return out

    def run(self, run_id: int) -> dict:
        """One recorded run as a report-shaped dict (as previous() gives it)."""
        with self._errors(f"cannot read run {run_id}"), self.engine.connect() as conn:
            row = conn.execute(sa.select(*RUN_COLUMNS, runs_t.c.meta).where(
                runs_t.c.id == run_id)).first()
            if row is None:
                raise HistoryError(f"{self.name}: no run {run_id}")
            return self._doc(conn, row)

    @staticmethod
    def _doc(conn, row) -> dict:
        common = (row.meta or {}).get("provenance")
        results = [result_dict(r, common) for r in conn.execute(
            sa.select(results_t).where(results_t.c.run_id == row.id).order_by(results_t.c.id))]
        meta = dict(row.meta or {})
        changes = meta.pop("changes", [])
        run = _run(row)
        doc = {"meta": meta, "results": results, "changes": changes, "run": run,
               "date": run["date"]}
        if row.nightly_exit is not None:
            doc["exit"] = row.nightly_exit
        return doc

    def series(self, key: str, board=None, model=None, arch=None) -> list[dict]:
        """One figure over time: a row per result of `key` (by board, then date): run, date,
        board, device, driver, arch, value, spread, status, unit, expected (and key)."""
        return self.figures([key], board=board, model=model, arch=arch)

    def figures(self, keys: list[str] | None = None, board=None, model=None,
                arch=None) -> list[dict]:
        """The rows `series` gives, of several keys (None: every key) in one query: by key,
        then board, then date (the pages of a whole history read it once)."""
        q = (sa.select(results_t.c.key, runs_t.c.id.label("run"), runs_t.c.run_date,
                       runs_t.c.board, runs_t.c.device, runs_t.c.driver, results_t.c.arch,
                       results_t.c.value, results_t.c.spread, results_t.c.status,
                       results_t.c.unit, results_t.c.expected)
             .join(results_t, results_t.c.run_id == runs_t.c.id)
             .where(*self._where(board, model))
             .order_by(results_t.c.key, runs_t.c.board.asc().nulls_last(),
                       runs_t.c.run_date.asc().nulls_first(), runs_t.c.id, results_t.c.id))
        if keys is not None:
            q = q.where(results_t.c.key.in_(list(keys)))
        if arch is not None:
            q = q.where(results_t.c.arch == arch)
        what = keys[0] if keys is not None and len(keys) == 1 else "the results"
        with self._errors(f"cannot read {what}"), self.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(q)]
        for r in rows:
            r["date"] = iso(r.pop("run_date"))
        return rows

    def fleet(self, key: str, model: str, arch: str | None = None) -> dict:
        """`key` across the boards of `model` (history_rows.fleet_of: per board its latest
        value, runs, min/max/median; across boards min, max, median, spread)."""
        name = self.resolve_model(model)
        return {"key": key, "model": name, "arch": arch,
                **fleet_of(self.series(key, model=name, arch=arch))}

    def boards(self, model: str | None = None) -> list[dict]:
        """Every board (None: the runs of unknown boards) with its model, arch, number of
        runs, first and last run date, the drivers it ran (oldest first) and its latest run's
        id and pytest and nightly exit statuses."""
        per: dict = {}
        for r in self.runs(model=model):
            b = per.setdefault((r["board"], r["device"]), {
                "board": r["board"], "device": r["device"], "arch": r["arch"], "runs": 0,
                "first": r["date"], "last": r["date"], "drivers": []})
            b["runs"] += 1
            b["last"] = r["date"] or b["last"]
            b.update(last_run=r["id"], pytest_exit=r["pytest_exit"],
                     nightly_exit=r["nightly_exit"])
            if r["driver"] and r["driver"] not in b["drivers"]:
                b["drivers"].append(r["driver"])
        return sorted(per.values(), key=lambda b: (b["board"] is None, b["board"] or "",
                                                   b["device"] or ""))

    def export_rows(self, key: str | None = None):
        """Every result (or those of `key`) with its run's columns (EXPORT_FIELDS), by run."""
        cols = [runs_t.c.id.label("run_id"), runs_t.c.run_date, runs_t.c.board,
                runs_t.c.device, runs_t.c.host, runs_t.c.driver, runs_t.c.cuda_driver_api,
                runs_t.c.suite_version] + [results_t.c[k] for k in EXPORT_FIELDS[8:]]
        q = sa.select(*cols).join(results_t, results_t.c.run_id == runs_t.c.id).order_by(
            runs_t.c.run_date.asc().nulls_first(), runs_t.c.id, results_t.c.id)
        if key is not None:
            q = q.where(results_t.c.key == key)
        with self._errors("cannot export"), self.engine.connect() as conn:
            for r in conn.execution_options(yield_per=2000).execute(q):
                d = dict(r._mapping)
                d["run_date"] = iso(d["run_date"])
                yield d


def _before(date, rid: int):
    """Runs before the run of (`date`, `rid`): earlier date, or the same date and a lower id."""
    if date is None:
        return sa.and_(runs_t.c.run_date.is_(None), runs_t.c.id < rid)
    return sa.or_(runs_t.c.run_date < date, runs_t.c.run_date.is_(None),
                  sa.and_(runs_t.c.run_date == date, runs_t.c.id < rid))


def _run(row) -> dict:
    m = row._mapping
    out = {k: m[k] for k in RUN_FIELDS}
    out["date"] = iso(out.pop("run_date"))
    out["recorded"] = iso(out["recorded"])
    return out


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None, microsecond=0)
