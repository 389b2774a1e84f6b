"""NVLink error counters: the ML Engineering book's recorded `nvidia-smi nvlink -e` of an H100, faults planted in a copy,
and NVML's counters through a stand-in for the driver library (no GPU here) serving the same recorded values."""

from ansible_collections.continuum.hydra.plugins.module_utils._host.gpus import nvlink_errors
from ansible_collections.continuum.hydra.plugins.module_utils._host.lines import BadLines
from ansible_collections.continuum.hydra.tests.support import interconnect as ic

ZERO = {"replay_errors": 0, "recovery_errors": 0, "crc_errors": 0}


def test_the_recorded_h100_output():
    bad = BadLines()
    (gpu,) = nvlink_errors.parse_nvlink_errors(ic.nvlink_text(), bad)
    assert (gpu["index"], gpu["name"], gpu["uuid"]) == (0, "NVIDIA H100 80GB HBM3", "GPU-abcdefab-cdef-abdc-abcd-abababababab")
    assert gpu["links"] == {"0": ZERO, "1": ZERO, "17": ZERO}
    assert bad.count == 0  # the author's "[...]" elision is not a link line


def test_planted_counts_bad_lines_and_the_bus_id_form_of_recent_drivers():
    text = ic.nvlink_text({(1, "Replay Errors"): 12})
    text = text.replace("Link 17: CRC Errors: 0", "Link 17: CRC Errors: 1.5").replace("Link 0: CRC Errors: 0", "Link 0: CRC Errors: N/A")
    bad = BadLines()
    (gpu,) = nvlink_errors.parse_nvlink_errors(text, bad)
    assert gpu["links"]["1"]["replay_errors"] == 12
    assert "crc_errors" not in gpu["links"]["17"] and "crc_errors" not in gpu["links"]["0"]   # unreadable / no such counter
    assert bad.count == 1 and bad.sample[0]["error"] == "'1.5' is not a count"
    # A driver that names the GPU by bus id and prints data counters beside the error counters.
    recent = ic.nvlink_text().replace("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-abcdefab-cdef-abdc-abcd-abababababab)",
                                      "GPU 00000008:06:00.0\n         Link 0: Tx packets: 123456")
    (gpu,) = nvlink_errors.parse_nvlink_errors(recent)
    assert (gpu["index"], gpu["pci_bus_id"]) == (None, "00000008:06:00.0") and gpu["links"]["0"] == ZERO
    orphan = BadLines()
    assert nvlink_errors.parse_nvlink_errors("Link 3: Replay Errors: 1\n", orphan) == [] and orphan.count == 1


class FakeNvml:
    """Stands in for the driver library only: links 0, 1 and 17 of one GPU, the recording's counts plus planted ones."""

    NVML_NVLINK_MAX_LINKS = 18
    NVML_NVLINK_ERROR_DL_REPLAY, NVML_NVLINK_ERROR_DL_RECOVERY, NVML_NVLINK_ERROR_DL_CRC_FLIT = 0, 1, 2
    NVML_NVLINK_ERROR_DL_CRC_DATA, NVML_NVLINK_ERROR_DL_ECC_DATA = 3, 4

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):  # noqa: N801 (pynvml's own name)
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-abcdefab-cdef-abdc-abcd-abababababab"

    def nvmlDeviceGetPciInfo(self, handle):
        return type("Pci", (), {"busId": "00000000:18:00.0"})

    def nvmlDeviceGetNvLinkState(self, handle, link):
        if link not in (0, 1, 17):
            raise self.NVMLError("Not Supported")
        return 1

    def nvmlDeviceGetNvLinkErrorCounter(self, handle, link, counter):
        if counter == self.NVML_NVLINK_ERROR_DL_ECC_DATA:
            raise self.NVMLError_NotSupported("Not Supported")
        if link == 17 and counter == self.NVML_NVLINK_ERROR_DL_CRC_DATA:
            raise self.NVMLError("Unknown Error")
        return 7 if (link, counter) == (1, self.NVML_NVLINK_ERROR_DL_REPLAY) else 0


def test_nvml_counters_in_the_same_record():
    (gpu,) = nvlink_errors.nvml_nvlink_errors(FakeNvml())
    assert (gpu["name"], gpu["pci_bus_id"]) == ("NVIDIA H100 80GB HBM3", "00000000:18:00.0")
    assert sorted(gpu["links"]) == ["0", "1", "17"]
    assert gpu["links"]["1"] == {"replay_errors": 7, "recovery_errors": 0, "crc_flit_errors": 0, "crc_data_errors": 0}
    assert "ecc_data_errors" not in gpu["links"]["0"]   # not supported on this GPU: left out, not unreadable
    assert gpu["unreadable"] == {"link 17 crc_data_errors": "NVMLError: Unknown Error"}
