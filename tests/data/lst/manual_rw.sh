#!/bin/bash
# The sample script of the Lustre Operations Manual's LNet self-test chapter and of
# lst(8): a session, servers, readers and writers, one batch (readers read 1M with
# check=simple, writers write 4K with check=full), its servers' statistics for a while
# from the background, and the end. The manual's addresses are left as @WORDS@ for the
# test that runs it (tests/integration/lst_scripts.sh, and the scale run's 7 servers,
# 127 readers and 127 writers).
export LST_SESSION=$$
lst new_session read/write
lst add_group servers @SERVERS@
lst add_group readers @READERS@
lst add_group writers @WRITERS@
lst add_batch bulk_rw
lst add_test --batch bulk_rw --from readers --to servers \
  brw read check=simple size=1M
lst add_test --batch bulk_rw --from writers --to servers \
  brw write check=full size=4K
# start running
lst run bulk_rw
# display server stats for @DURATION@ seconds
lst stat servers & sleep @DURATION@; kill $!
# tear down
lst end_session
