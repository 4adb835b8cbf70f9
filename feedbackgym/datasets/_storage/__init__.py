"""The store's private storage internals: segments, the write-ahead log, the writer and its process.

Nothing outside :mod:`feedbackgym.datasets` imports these modules; the public
API (:class:`~feedbackgym.datasets.store.TrajectoryStore`,
:class:`~feedbackgym.datasets.recorder.EpisodeRecorder`, ...) is built on them.
"""
