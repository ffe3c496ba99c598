"""``loopx demo``: a real multi-process campaign on a dataset bundled with scikit-learn.

``problem`` holds the learning problem (data splits, the project files the executors change),
``agents`` the lane commands each role runs under ``loopx lane run``, and ``run`` the driver
that sets the workspace up, starts the lanes as separate processes and reports progress.
"""
