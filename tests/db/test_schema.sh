#!/usr/bin/env bash
# db:schema: the fixture's database (scripts/pg.sh start), reached the way the
# servers reach it: the libpq URL in the file SM_TEST_DB_FILE names, over TCP
# as benchmarkdbuser. The TechEmpower tables, row counts, value ranges and
# every fortune byte for byte. Exit 77 (skipped) when the fixture made no
# database (no PostgreSQL server installed).
set -euo pipefail

fail=0
check() {  # check WHAT EXPECTED ACTUAL
  if [ "$2" == "$3" ]; then
    echo "ok   $1"
  else
    echo "FAIL $1"; echo "     expected: $2"; echo "     got:      $3"; fail=1
  fi
}

: "${SM_TEST_DB_FILE:?SM_TEST_DB_FILE is not set (a test requiring the fixture gets it: sm_requires_postgres)}"
if [ ! -s "$SM_TEST_DB_FILE" ]; then
  echo "no database: $SM_TEST_DB_FILE is absent (db:postgres-start was skipped: no PostgreSQL server installed?)"
  exit 77
fi
url=$(cat "$SM_TEST_DB_FILE")
psql=$(command -v psql || printf '%s\n' /usr/lib/postgresql/*/bin/psql | sort -V | tail -n1)
[ -x "$psql" ] || { echo "no psql (Debian: postgresql-client-15)"; exit 77; }
export PGCLIENTENCODING=UTF8 PGCONNECT_TIMEOUT=5
q() { "$psql" "$url" -X -A -t -q -v ON_ERROR_STOP=1 -c "$1"; }

check "the URL's shape" "postgresql://benchmarkdbuser:benchmarkdbpass@127.0.0.1:PORT/hello_world" \
      "$(sed -E 's/:[0-9]+\//:PORT\//' <<<"$url")"
check "connected as" "benchmarkdbuser|hello_world|UTF8|C" \
      "$(q "SELECT current_user, current_database(), pg_encoding_to_char(encoding), datcollate
            FROM pg_database WHERE datname = current_database()")"
check "a wrong password is refused" "refused" \
      "$("$psql" "${url/benchmarkdbpass/wrong}" -XAtqc 'SELECT 1' >/dev/null 2>&1 && echo accepted || echo refused)"

check "the tables' columns" \
  "fortune|id|integer|NO
fortune|message|character varying(2048)|NO
world|id|integer|NO
world|randomnumber|integer|NO" \
  "$(q "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
               CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         WHERE c.relname IN ('world', 'fortune') AND c.relkind = 'r' AND a.attnum > 0
         ORDER BY 1, a.attnum")"
check "the primary keys" "fortune_pkey|world_pkey" \
      "$(q "SELECT string_agg(conname, '|' ORDER BY conname) FROM pg_constraint
             WHERE contype = 'p' AND conrelid IN ('world'::regclass, 'fortune'::regclass)")"
check "the owner" "benchmarkdbuser|benchmarkdbuser" \
      "$(q "SELECT string_agg(tableowner, '|') FROM pg_tables WHERE tablename IN ('world', 'fortune')")"

check "world: rows, distinct ids, min and max id" "10000|10000|1|10000" \
      "$(q "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM world")"
check "world: randomnumber within 1..10000" "0" \
      "$(q "SELECT count(*) FROM world WHERE randomnumber NOT BETWEEN 1 AND 10000")"
check "world: randomnumber random (over 5000 distinct values)" "t" \
      "$(q "SELECT count(DISTINCT randomnumber) > 5000 FROM world")"
check "analyzed (the planner knows the row counts)" "10000|12" \
      "$(q "SELECT (SELECT reltuples::bigint FROM pg_class WHERE relname = 'world'),
                   (SELECT reltuples::bigint FROM pg_class WHERE relname = 'fortune')")"

check "fortune: rows, min and max id" "12|1|12" "$(q "SELECT count(*), min(id), max(id) FROM fortune")"
check "fortune 12, its UTF-8 bytes" \
      "e38395e383ace383bce383a0e383afe383bce382afe381aee38399e383b3e38381e3839ee383bce382af" \
      "$(q "SELECT encode(convert_to(message, 'UTF8'), 'hex') FROM fortune WHERE id = 12")"
check "fortune 11, exactly" \
      '<script>alert("This should not be displayed in a browser alert box.");</script>' \
      "$(q "SELECT message FROM fortune WHERE id = 11")"
check "every fortune, exactly" \
  "1|fortune: No such file or directory
2|A computer scientist is someone who fixes things that aren't broken.
3|After enough decimal places, nobody gives a damn.
4|A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1
5|A computer program does what you tell it to do, not what you want it to do.
6|Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen
7|Any program that runs right is obsolete.
8|A list is only as strong as its weakest link. — Donald Knuth
9|Feature: A bug with seniority.
10|Computers make very fast, very accurate mistakes.
11|<script>alert(\"This should not be displayed in a browser alert box.\");</script>
12|フレームワークのベンチマーク" \
  "$(q "SELECT id, message FROM fortune ORDER BY id")"
check "the em dashes are U+2014 (3 bytes)" "6|73|71
8|62|60" \
      "$(q "SELECT id, octet_length(message), length(message) FROM fortune WHERE id IN (6, 8) ORDER BY id")"

exit $fail
