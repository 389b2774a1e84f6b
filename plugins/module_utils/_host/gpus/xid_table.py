# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""NVIDIA's XID catalogue as data: code -> (mnemonic, NVIDIA's immediate action).

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog"
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), the
"Resolution Bucket (Immediate Action)" column for Ampere and newer GPUs, as
mirrored in NVIDIA/NVSentinel (xiderrorsmapping.csv). XID 154's action there is
"follow the guidance of the XID it refers to", written SEE_LINKED_XID here.
Update this table, not the check, when NVIDIA publishes new codes.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from ansible_collections.continuum.hydra.plugins.module_utils import _expect, _status

# An XID's severity (details.gpus[].severity of gpu.xid_errors). "warning" is spelt once, in the status module, where it is a host verdict.
CRITICAL = "critical"
WARNING = _status.WARNING
INFO = "info"

# hydra_expect.xid_policy names these severities (_expect.XID_SEVERITIES validates them): the two lists are one.
if set(_expect.XID_SEVERITIES) != {CRITICAL, WARNING, INFO}:
    raise ValueError("_expect.XID_SEVERITIES %r differs from the XID table's severities" % (_expect.XID_SEVERITIES,))

XID_CATALOG = {
    1: ("ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "UNEXPECTED_ERR_REPORT_ISSUE"),
    2: ("ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "UNEXPECTED_ERR_REPORT_ISSUE"),
    3: ("ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "UNEXPECTED_ERR_REPORT_ISSUE"),
    4: ("ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "UNEXPECTED_ERR_REPORT_ISSUE"),
    5: ("ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "UNEXPECTED_ERR_REPORT_ISSUE"),
    6: ("ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    7: ("ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    8: ("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "RESTART_APP"),
    9: ("ROBUST_CHANNEL_GR_ERROR_INSTANCE", "UNEXPECTED_ERR_REPORT_ISSUE"),
    10: ("ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "UNEXPECTED_ERR_REPORT_ISSUE"),
    11: ("ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "RESTART_APP"),
    12: ("ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "UNEXPECTED_ERR_REPORT_ISSUE"),
    13: ("ROBUST_CHANNEL_GR_EXCEPTION", "RESTART_APP"),
    14: ("ROBUST_CHANNEL_FAKE_ERROR", "IGNORE"),
    15: ("ROBUST_CHANNEL_SCANLINE_TIMEOUT", "UNEXPECTED_ERR_REPORT_ISSUE"),
    16: ("ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "UNEXPECTED_ERR_REPORT_ISSUE"),
    17: ("ROBUST_CHANNEL_PARAMETER_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    18: ("ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    19: ("ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "UNEXPECTED_ERR_REPORT_ISSUE"),
    20: ("ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "UNEXPECTED_ERR_REPORT_ISSUE"),
    21: ("ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "UNEXPECTED_ERR_REPORT_ISSUE"),
    22: ("ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "UNEXPECTED_ERR_REPORT_ISSUE"),
    23: ("ROBUST_CHANNEL_RC_LOGGING_ENABLED", "UNEXPECTED_ERR_REPORT_ISSUE"),
    24: ("ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "UNEXPECTED_ERR_REPORT_ISSUE"),
    25: ("ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "RESTART_APP"),
    26: ("ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "UNEXPECTED_ERR_REPORT_ISSUE"),
    27: ("ROBUST_CHANNEL_VP_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    28: ("ROBUST_CHANNEL_VP2_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    29: ("ROBUST_CHANNEL_BSP_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    30: ("ROBUST_CHANNEL_BAD_ADDR_ACCESS", "UNEXPECTED_ERR_REPORT_ISSUE"),
    31: ("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP"),
    32: ("ROBUST_CHANNEL_PBDMA_ERROR", "RESTART_APP"),
    33: ("ROBUST_CHANNEL_SEC_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    34: ("ROBUST_CHANNEL_MSVLD_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    35: ("ROBUST_CHANNEL_MSPDEC_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    36: ("ROBUST_CHANNEL_MSPPP_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    37: ("ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "IGNORE"),
    38: ("ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "IGNORE"),
    39: ("ROBUST_CHANNEL_CE0_ERROR", "RESTART_APP"),
    40: ("ROBUST_CHANNEL_CE1_ERROR", "RESTART_APP"),
    41: ("ROBUST_CHANNEL_CE2_ERROR", "RESTART_APP"),
    42: ("ROBUST_CHANNEL_VIC_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    43: ("ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "IGNORE"),
    44: ("ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "IGNORE"),
    45: ("ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45"),
    46: ("ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "RESET_GPU"),
    47: ("ROBUST_CHANNEL_NVENC0_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    48: ("ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48"),
    49: ("SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "UNEXPECTED_ERR_REPORT_ISSUE"),
    50: ("SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    51: ("SILENT_RUNNING_STRESS_TEST_FAILURE", "UNEXPECTED_ERR_REPORT_ISSUE"),
    52: ("SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "UNEXPECTED_ERR_REPORT_ISSUE"),
    53: ("SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "UNEXPECTED_ERR_REPORT_ISSUE"),
    54: ("SILENT_RUNNING_PWR_REDUCED_CLOCKING", "CHECK_MECHANICALS"),
    55: ("SILENT_RUNNING_TEMPERATURE_READ_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    56: ("DISPLAY_CHANNEL_EXCEPTION", "UNEXPECTED_ERR_REPORT_ISSUE"),
    57: ("FB_LINK_TRAINING_FAILURE_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    58: ("FB_MEMORY_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    59: ("PMU_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    60: ("ROBUST_CHANNEL_SEC2_ERROR", "RESTART_APP"),
    61: ("PMU_BREAKPOINT", "UNEXPECTED_ERR_REPORT_ISSUE"),
    62: ("PMU_HALT_ERROR", "RESET_GPU"),
    63: ("INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE"),
    64: ("INFOROM_DRAM_RETIREMENT_FAILURE", "RESET_GPU"),
    65: ("ROBUST_CHANNEL_NVENC1_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    66: ("ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "IGNORE"),
    67: ("ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "IGNORE"),
    68: ("ROBUST_CHANNEL_NVDEC0_ERROR", "RESTART_APP"),
    69: ("ROBUST_CHANNEL_GR_CLASS_ERROR", "RESTART_APP"),
    70: ("ROBUST_CHANNEL_CE3_ERROR", "RESTART_APP"),
    71: ("ROBUST_CHANNEL_CE4_ERROR", "RESTART_APP"),
    72: ("ROBUST_CHANNEL_CE5_ERROR", "RESTART_APP"),
    73: ("ROBUST_CHANNEL_NVENC2_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    74: ("NVLINK_ERROR", "WORKFLOW_NVLINK_ERR"),
    75: ("ROBUST_CHANNEL_CE6_ERROR", "RESTART_APP"),
    76: ("ROBUST_CHANNEL_CE7_ERROR", "RESTART_APP"),
    77: ("ROBUST_CHANNEL_CE8_ERROR", "RESTART_APP"),
    78: ("VGPU_START_ERROR", "UPDATE_SWFW"),
    79: ("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM"),
    80: ("PBDMA_PUSHBUFFER_CRC_MISMATCH", "RESTART_APP"),
    81: ("ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    82: ("ROBUST_CHANNEL_NVJPG0_ERROR", "RESTART_APP"),
    83: ("ROBUST_CHANNEL_NVDEC1_ERROR", "RESTART_APP"),
    84: ("ROBUST_CHANNEL_NVDEC2_ERROR", "RESTART_APP"),
    85: ("ROBUST_CHANNEL_CE9_ERROR", "RESTART_APP"),
    86: ("ROBUST_CHANNEL_OFA0_ERROR", "RESTART_APP"),
    87: ("NVTELEMETRY_DRIVER_REPORT", "UNEXPECTED_ERR_REPORT_ISSUE"),
    88: ("ROBUST_CHANNEL_NVDEC3_ERROR", "RESTART_APP"),
    89: ("ROBUST_CHANNEL_NVDEC4_ERROR", "RESTART_APP"),
    90: ("LTC_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    91: ("RESERVED_XID", "UNEXPECTED_ERR_REPORT_ISSUE"),
    92: ("EXCESSIVE_SBE_INTERRUPTS", "IGNORE"),
    93: ("INFOROM_ERASE_LIMIT_EXCEEDED", "IGNORE"),
    94: ("ROBUST_CHANNEL_CONTAINED_ERROR", "RESTART_APP"),
    95: ("ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU"),
    96: ("ROBUST_CHANNEL_NVDEC5_ERROR", "RESTART_APP"),
    97: ("ROBUST_CHANNEL_NVDEC6_ERROR", "RESTART_APP"),
    98: ("ROBUST_CHANNEL_NVDEC7_ERROR", "RESTART_APP"),
    99: ("ROBUST_CHANNEL_NVJPG1_ERROR", "RESTART_APP"),
    100: ("ROBUST_CHANNEL_NVJPG2_ERROR", "RESTART_APP"),
    101: ("ROBUST_CHANNEL_NVJPG3_ERROR", "RESTART_APP"),
    102: ("ROBUST_CHANNEL_NVJPG4_ERROR", "RESTART_APP"),
    103: ("ROBUST_CHANNEL_NVJPG5_ERROR", "RESTART_APP"),
    104: ("ROBUST_CHANNEL_NVJPG6_ERROR", "RESTART_APP"),
    105: ("ROBUST_CHANNEL_NVJPG7_ERROR", "RESTART_APP"),
    106: ("SMBPBI_TEST_MESSAGE", "IGNORE"),
    107: ("SMBPBI_TEST_MESSAGE_SILENT", "IGNORE"),
    108: ("DESTINATION_FLA_TRANSLATION_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    109: ("ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "RESET_GPU"),
    110: ("SEC_FAULT_ERROR", "RESET_GPU"),
    111: ("BUNDLE_ERROR_EVENT", "UNEXPECTED_ERR_REPORT_ISSUE"),
    112: ("DISP_SUPERVISOR_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    113: ("DP_LT_FAILURE", "UNEXPECTED_ERR_REPORT_ISSUE"),
    114: ("HEAD_RG_UNDERFLOW", "UNEXPECTED_ERR_REPORT_ISSUE"),
    115: ("CORE_CHANNEL_REGS", "UNEXPECTED_ERR_REPORT_ISSUE"),
    116: ("WINDOW_CHANNEL_REGS", "UNEXPECTED_ERR_REPORT_ISSUE"),
    117: ("CURSOR_CHANNEL_REGS", "UNEXPECTED_ERR_REPORT_ISSUE"),
    118: ("HEAD_REGS", "UNEXPECTED_ERR_REPORT_ISSUE"),
    119: ("GSP_RPC_TIMEOUT", "RESET_GPU"),
    120: ("GSP_ERROR", "RESET_GPU"),
    121: ("C2C_ERROR", "IGNORE"),
    122: ("SPI_PMU_RPC_READ_FAIL", "UNEXPECTED_ERR_REPORT_ISSUE"),
    123: ("SPI_PMU_RPC_WRITE_FAIL", "UNEXPECTED_ERR_REPORT_ISSUE"),
    124: ("SPI_PMU_RPC_ERASE_FAIL", "UNEXPECTED_ERR_REPORT_ISSUE"),
    125: ("INFOROM_FS_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    126: ("ROBUST_CHANNEL_CE10_ERROR", "RESTART_APP"),
    127: ("ROBUST_CHANNEL_CE11_ERROR", "RESTART_APP"),
    128: ("ROBUST_CHANNEL_CE12_ERROR", "RESTART_APP"),
    129: ("ROBUST_CHANNEL_CE13_ERROR", "RESTART_APP"),
    130: ("ROBUST_CHANNEL_CE14_ERROR", "RESTART_APP"),
    131: ("ROBUST_CHANNEL_CE15_ERROR", "RESTART_APP"),
    132: ("ROBUST_CHANNEL_CE16_ERROR", "RESTART_APP"),
    133: ("ROBUST_CHANNEL_CE17_ERROR", "RESTART_APP"),
    134: ("ROBUST_CHANNEL_CE18_ERROR", "RESTART_APP"),
    135: ("ROBUST_CHANNEL_CE19_ERROR", "RESTART_APP"),
    136: ("ALI_TRAINING_FAIL", "RESET_GPU"),
    137: ("NVLINK_FLA_PRIV_ERR", "IGNORE"),
    138: ("ROBUST_CHANNEL_DLA_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    139: ("ROBUST_CHANNEL_OFA1_ERROR", "RESTART_APP"),
    140: ("UNRECOVERABLE_ECC_ERROR_ESCAPE", "RESET_GPU"),
    141: ("ROBUST_CHANNEL_FAST_PATH_ERROR", "IGNORE"),
    142: ("ROBUST_CHANNEL_NVENC3_ERROR", "UNEXPECTED_ERR_REPORT_ISSUE"),
    143: ("GPU_INIT_ERROR", "RESET_GPU"),
    144: ("NVLINK_SAW_ERROR", "WORKFLOW_NVLINK5_ERR"),
    145: ("NVLINK_RLW_ERROR", "WORKFLOW_NVLINK5_ERR"),
    146: ("NVLINK_TLW_ERROR", "WORKFLOW_NVLINK5_ERR"),
    147: ("NVLINK_TREX_ERROR", "WORKFLOW_NVLINK5_ERR"),
    148: ("NVLINK_NVLPW_CTRL_ERROR", "WORKFLOW_NVLINK5_ERR"),
    149: ("NVLINK_NETIR_ERROR", "WORKFLOW_NVLINK5_ERR"),
    150: ("NVLINK_MSE_ERROR", "WORKFLOW_NVLINK5_ERR"),
    151: ("ROBUST_CHANNEL_KEY_ROTATION_ERROR", "RESTART_VM"),
    152: ("ROBUST_CHANNEL_DLA_SMMU_ERROR", "IGNORE"),
    153: ("ROBUST_CHANNEL_DLA_TIMEOUT", "IGNORE"),
    154: ("GPU_RECOVERY_ACTION_CHANGED", "SEE_LINKED_XID"),
    155: ("NVLINK_SW_DEFINED_ERROR", "RESET_GPU"),
    156: ("RESOURCE_RETIREMENT_EVENT", "RESET_GPU"),
    157: ("RESOURCE_RETIREMENT_FAILURE", "IGNORE"),
    158: ("GPU_FATAL_TIMEOUT", "RESET_GPU"),
    159: ("ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHECK_UVM"),
    160: ("CHANNEL_RETIREMENT_EVENT", "RESTART_BM"),
    161: ("CHANNEL_RETIREMENT_FAILURE", "IGNORE"),
}

# How doctor grades NVIDIA's immediate action: critical needs the node drained and the GPU
# reset or replaced; warning needs a look; info is the application's own fault or benign.
SEVERITY_BY_ACTION = {
    "RESTART_BM": CRITICAL,
    "RESET_GPU": CRITICAL,
    "RESTART_VM": CRITICAL,
    "CHECK_MECHANICALS": CRITICAL,
    "WORKFLOW_XID_48": CRITICAL,
    "WORKFLOW_NVLINK_ERR": CRITICAL,
    "WORKFLOW_NVLINK5_ERR": CRITICAL,
    "UNEXPECTED_ERR_REPORT_ISSUE": WARNING,
    "UPDATE_SWFW": WARNING,
    "CHECK_UVM": WARNING,
    "RESTART_APP": INFO,
    "IGNORE": INFO,
    "WORKFLOW_XID_45": INFO,
    "SEE_LINKED_XID": INFO,
}

# Where doctor grades a code above NVIDIA's immediate action, and why.
SEVERITY_OVERRIDES = {
    63: WARNING,  # a row remap or page retirement was recorded and waits for a GPU reset
    92: WARNING,  # a high single-bit ECC rate comes before uncorrectable errors
    94: WARNING,  # an uncorrectable memory error, contained to one application this time
}

# Plain-language names of the codes seen most in the field (the mnemonic stands in for the rest).
DESCRIPTIONS = {
    8: "GPU stopped processing",
    13: "graphics engine exception (usually an application fault)",
    31: "GPU memory page fault (usually an application fault)",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware watchdog timeout",
    43: "GPU stopped processing; channel reset after an application fault",
    44: "graphics engine fault during context switch",
    45: "preemptive cleanup after earlier errors",
    46: "GPU stopped processing (timeout)",
    48: "double-bit (uncorrectable) ECC error",
    54: "clocks reduced for power (check the power cabling)",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "row remap or page retirement recorded, active after a GPU reset",
    64: "row remap or page retirement failed",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout (GPU firmware not answering)",
    120: "GSP firmware error",
    121: "C2C link error",
    136: "link training failure",
    140: "unrecovered ECC error",
    143: "GPU initialization failure",
    154: "GPU recovery action changed",
    155: "NVLink software-defined error",
    158: "GPU fatal timeout",
}

# Codes whose catalogue row says "follow the Xid it names": an Xid 45 ("... caused by previous Xid 149")
# is graded by the code it names when that code is not itself in the window.
LINKED_BY_CAUSE = (45,)

# ---------------------------------------------------------------- GPU lost without an Xid line
#
# The driver reports these conditions in prose, not as an Xid. Each is graded critical: the GPU is gone or
# unusable until it is reset or the node rebooted. Source: NVIDIA's XID catalogue rows for the Xid that names
# the same condition (79 GPU has fallen off the bus -> RESTART_BM; 119/120 GSP -> RESET_GPU; 143 GPU
# initialisation failure -> RESET_GPU), https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html.
# kind (as xid.parse_loss_lines names it) -> (description, NVIDIA action of the matching Xid).
LOSS_CATALOG = {
    "fallen_off_bus": ("GPU has fallen off the bus (no Xid line)", "RESTART_BM"),
    "init_failed": ("the driver could not initialise the GPU (RmInitAdapter failed)", "RESET_GPU"),
    "gsp_init_failed": ("the GPU's GSP firmware did not start (RmInitAdapter failed, 0x62)", "RESET_GPU"),
    "reset_required": ("the driver reports the GPU needs a reset (NV_ERR_RESET_REQUIRED)", "RESET_GPU"),
    "gsp_timeout": ("the GPU's GSP firmware stopped answering (GSP timeout)", "RESET_GPU"),
}

# ---------------------------------------------------------------- NVSwitch SXids
#
# Source: NVIDIA Fabric Manager User Guide (DU-09883-001), appendix "NVSwitch SXid Errors"
# (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html): the driver prints each
# SXid as "SXid (PCI:<switch>): <code>, Fatal|Non-fatal, <text>", and that word is the grade (fatal: the
# NVSwitch and its GPUs need a reset; non-fatal: logged and corrected). This table grades the SXid lines
# that carry no such word (the "Severity" and "Data" lines, when their first line was not in the window):
# code -> (name, fatal). Names and severities as the guide lists them; the rows are the codes seen in the
# recorded lines of tests/fixtures/kernel-log/README.md. An unknown code with no word is a warning.
SXID_CATALOG = {
    12028: ("egress non-posted PRIV error", False),
    20009: ("RX short error rate", False),
    20034: ("LTSSM fault up", True),
    22013: ("Minion link DLREQ interrupt", False),
    24007: ("sourcetrack timeout error", True),
    28006: ("MC TS crumbstore MCTO", False),
}
