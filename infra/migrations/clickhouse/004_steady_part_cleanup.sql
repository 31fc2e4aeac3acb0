-- Parts a merge replaced are deleted by a cleanup pass, by default every 30-40 s, all at once:
-- after a burst of small inserts that was thousands of part directories in one go, and inserts
-- waited on the table directory's lock behind it (accepted -> done stalls of 100-300 ms seen
-- ~30 s after a burst of 1,000 small requests a second). A pass every second, at most 200 parts
-- each, spreads the same work out.
ALTER TABLE {db}.events MODIFY SETTING cleanup_delay_period = 1, cleanup_delay_period_random_add = 0, simultaneous_parts_removal_limit = 200;
ALTER TABLE {db}.profile_snapshots MODIFY SETTING cleanup_delay_period = 1, cleanup_delay_period_random_add = 0, simultaneous_parts_removal_limit = 200;
ALTER TABLE {db}.profile_overrides MODIFY SETTING cleanup_delay_period = 1, cleanup_delay_period_random_add = 0, simultaneous_parts_removal_limit = 200;
