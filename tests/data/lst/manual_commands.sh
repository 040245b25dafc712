#!/bin/bash
# The Operations Manual's self-test command examples, one after another as a user tries
# them (their addresses left as @WORDS@ for tests/integration/lst_scripts.sh): groups
# made, listed, refreshed, cleaned and shrunk; a batch with the manual's brw WRITE test,
# run, queried, listed and stopped; nodes pinged by NID; statistics and errors.
# LST_SESSION comes from the caller. Every line must succeed.
set -e
lst new_session --timeout 200 --force manual
lst add_group servers @SERVERS@
lst add_group clients @CLIENTS@ @MORE_CLIENTS@
lst list_group
lst list_group clients
lst list_group clients --all
lst list_group clients --active
lst update_group clients --refresh
lst update_group clients --clean busy
lst update_group clients --clean invalid
lst add_group spare @MORE_CLIENTS@
lst update_group spare --remove @ONE_MORE_CLIENT@
lst list_group spare --all
lst del_group spare
lst add_batch bulkperf
lst add_test --batch bulkperf --loop 100 --concurrency 4 --distribute 4:2 --from clients --to servers \
  brw WRITE size=16K
lst add_test --batch bulkperf --loop 100 --from clients --to servers ping
lst list_batch
lst list_batch bulkperf
lst list_batch bulkperf --test 1 --server
lst run bulkperf
lst query bulkperf --loop 5 --delay 1
lst ping @SERVERS@
lst ping --group clients
lst stat --count 1 --delay 1 servers
lst stat --count 1 --delay 1 --bw --mbs clients
lst show_error clients
lst show_error --session servers
lst stop bulkperf
lst end_session
