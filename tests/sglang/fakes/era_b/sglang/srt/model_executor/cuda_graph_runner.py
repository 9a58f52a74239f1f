"""FAKE era-B layout: profiling helpers on CudaGraphRunner, no native export."""


class CudaGraphRunner:
    def _init_profile_context_and_memory_record(self):
        return "profile-of-" + type(self).__name__

    def _post_process_after_profile(self, prof_context):
        self.tables = prof_context

    def capture(self):
        prof = self._init_profile_context_and_memory_record()
        self._post_process_after_profile(prof)
