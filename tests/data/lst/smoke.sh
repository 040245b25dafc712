#!/bin/bash
# The shape of the script Lustre's lnet-selftest.sh writes for its "smoke" test (with
# SLOW=no: concurrency 1 and 8, sizes 4k and 1M), its node lists and numbers left as
# @WORDS@ for tests/integration/lst_scripts.sh to fill in. Run as that test framework
# runs it: `sh smoke.sh | tee LOG`, LST_SESSION exported; then the framework stops the
# batch, shows the errors of c and s and ends the session, and fails on any line of LOG
# starting "Total" whose second word is not 0.
set -e
cleanup () { trap 0; echo killing $1 ... ; kill -9 $1 || true; }
lst new_session --timeo 100000 hh
lst add_group c @CLIENTS@
lst add_group s @SERVERS@
lst add_batch b
lst list_group s bad_group c
lst add_test --batch b --loop @LOOP@  --concurrency 1 --distribute @NC@:@NS@ --from c --to s brw read check=full size=4k
lst add_test --batch b --loop @LOOP@  --concurrency 1 --distribute @NS@:@NC@ --from s --to c brw read check=full size=4k
lst add_test --batch b --loop @LOOP@  --concurrency 8 --distribute @NC@:@NS@ --from c --to s brw read check=full size=4k
lst add_test --batch b --loop @LOOP@  --concurrency 8 --distribute @NS@:@NC@ --from s --to c brw read check=full size=4k
lst add_test --batch b --loop @LOOP@  --concurrency 1 --distribute @NC@:@NS@ --from c --to s brw read check=full size=1M
lst add_test --batch b --loop @LOOP@  --concurrency 1 --distribute @NS@:@NC@ --from s --to c brw read check=full size=1M
lst add_test --batch b --loop @LOOP@  --concurrency 8 --distribute @NC@:@NS@ --from c --to s brw read check=full size=1M
lst add_test --batch b --loop @LOOP@  --concurrency 8 --distribute @NS@:@NC@ --from s --to c brw read check=full size=1M
lst add_test --batch b --loop @LOOP@  --concurrency 1 --distribute @NC@:@NS@ --from c --to s brw write check=full size=4k
lst add_test --batch b --loop @LOOP@  --concurrency 1 --distribute @NS@:@NC@ --from s --to c brw write check=full size=4k
lst add_test --batch b --loop @LOOP@  --concurrency 8 --distribute @NC@:@NS@ --from c --to s brw write check=full size=4k
lst add_test --batch b --loop @LOOP@  --concurrency 8 --distribute @NS@:@NC@ --from s --to c brw write check=full size=4k
lst add_test --batch b --loop @LOOP@  --concurrency 1 --distribute @NC@:@NS@ --from c --to s brw write check=full size=1M
lst add_test --batch b --loop @LOOP@  --concurrency 1 --distribute @NS@:@NC@ --from s --to c brw write check=full size=1M
lst add_test --batch b --loop @LOOP@  --concurrency 8 --distribute @NC@:@NS@ --from c --to s brw write check=full size=1M
lst add_test --batch b --loop @LOOP@  --concurrency 8 --distribute @NS@:@NC@ --from s --to c brw write check=full size=1M
lst add_test --batch b --loop @LOOP@  --concurrency 1 --distribute @NC@:@NS@ --from c --to s ping 
lst add_test --batch b --loop @LOOP@  --concurrency 1 --distribute @NS@:@NC@ --from s --to c ping 
lst add_test --batch b --loop @LOOP@  --concurrency 8 --distribute @NC@:@NS@ --from c --to s ping 
lst add_test --batch b --loop @LOOP@  --concurrency 8 --distribute @NS@:@NC@ --from s --to c ping 
lst run b
sleep 1
lst stat --delay 10 --timeout 10 c s &
pid=$!
trap "cleanup $pid" INT TERM
sleep @DURATION@
cleanup $pid
