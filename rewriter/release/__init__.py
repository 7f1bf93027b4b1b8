"""What is said of released values: post-processing, error bars and explanations.

- `computed`: answers computed from released values (free post-processing).
- `outer`: a query over one aggregate subquery, run over its released rows.
- `error_bars`: the interval each released column states.
- `propagate`: intervals carried through expressions over released values.
- `unit_report`: how the NOTICE and `dpgate explain` describe the privacy model.
- `explain`: `dpgate explain`, the analysis of one statement as JSON data.
"""
