package probe

import "fmt"

// ResultCode is one value of a library's result enum, with what it means
// for a container: Meaning paraphrases the header's description, Cause
// says where such a result usually comes from when the library is used in
// a container (empty where the header's meaning is all there is to say).
type ResultCode struct {
	Code    int    `json:"code"`
	Name    string `json:"name"`
	Meaning string `json:"meaning"`
	Cause   string `json:"cause,omitempty"`
}

// CUDAResults are CUresult values (enum cudaError_enum in the CUDA driver
// API's cuda.h; the numbers are stable across CUDA releases, new ones are
// only added). Listed: those a probe of init, device query, context,
// allocation and copy can return, and the ones of a broken setup.
var CUDAResults = []ResultCode{
	{0, "CUDA_SUCCESS", "no error", ""},
	{1, "CUDA_ERROR_INVALID_VALUE", "an argument was out of range", "a probe bug or an ABI change of the driver library"},
	{2, "CUDA_ERROR_OUT_OF_MEMORY", "the device could not allocate the memory asked for", "the GPU's memory is used by other processes (nvidia-smi lists them), or a MIG instance too small"},
	{3, "CUDA_ERROR_NOT_INITIALIZED", "cuInit has not succeeded", "an earlier cuInit failed"},
	{4, "CUDA_ERROR_DEINITIALIZED", "the driver is shutting down", ""},
	{34, "CUDA_ERROR_STUB_LIBRARY", "the libcuda.so.1 loaded is the CUDA toolkit's link-time stub, not the driver's library", "the driver's user-space libraries were not mounted into the container (NVIDIA container toolkit, CDI spec), and a stub from the image's CUDA toolkit was found instead"},
	{35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "the installed kernel driver is older than this CUDA driver library supports", "the container brings a newer libcuda (a CUDA forward-compatibility package) than the host's kernel module allows, or the library and module come from different driver installs"},
	{36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "the call needs a newer driver", ""},
	{46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "the device is not available now", "the GPU is in Exclusive_Process compute mode and another process holds it, or it is prohibited (nvidia-smi -q shows the compute mode)"},
	{100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is visible to the driver", "the container lacks the /dev/nvidia* nodes or may not open them (cgroup), CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES selects nothing, or the host driver sees no GPU"},
	{101, "CUDA_ERROR_INVALID_DEVICE", "the device ordinal is not a valid device", "CUDA_VISIBLE_DEVICES names a device that is not there"},
	{102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "the device has no valid license", "a vGPU without a license from its license server"},
	{201, "CUDA_ERROR_INVALID_CONTEXT", "no valid context is current", ""},
	{214, "CUDA_ERROR_ECC_UNCORRECTABLE", "an uncorrectable ECC error was detected", "a hardware fault of the GPU's memory: the GPU needs a reset (nvidia-smi -r) or service"},
	{216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "the context is in use by another thread", "the GPU is in Exclusive_Thread compute mode"},
	{220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "an uncorrectable NVLink error was detected", "a hardware fault of an NVLink"},
	{303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "initializing a shared object failed", ""},
	{304, "CUDA_ERROR_OPERATING_SYSTEM", "an operating-system call failed", "an open of /dev/nvidiactl, /dev/nvidia-uvm or /dev/nvidiaN was refused: the device cgroup (EPERM) or the node's mode (EACCES); the node probes above say which"},
	{400, "CUDA_ERROR_INVALID_HANDLE", "a handle argument was invalid", ""},
	{700, "CUDA_ERROR_ILLEGAL_ADDRESS", "a memory access out of bounds", "the context is unusable; on a copy of a fresh allocation, a driver or hardware fault"},
	{709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "the context was destroyed", ""},
	{719, "CUDA_ERROR_LAUNCH_FAILED", "an exception on the device", "a driver or hardware fault (Xid in the host's kernel log)"},
	{800, "CUDA_ERROR_NOT_PERMITTED", "the operation is not permitted", ""},
	{801, "CUDA_ERROR_NOT_SUPPORTED", "the operation is not supported on this device or system", ""},
	{802, "CUDA_ERROR_SYSTEM_NOT_READY", "the system is not ready for CUDA", "on an NVSwitch system (HGX), nvidia-fabricmanager is not running or not done; on MIG, no instance was created"},
	{803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "the driver library and the kernel module are of different versions", "the container mounts a libcuda.so.1 of another driver release than the host's module (a driver upgrade without restarting the container, or libraries baked into the image)"},
	{804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility is not supported on this device", "a CUDA compat package in the image on a GPU that does not support it"},
	{805, "CUDA_ERROR_MPS_CONNECTION_FAILED", "the MPS client could not connect to the MPS server", "CUDA_MPS_PIPE_DIRECTORY points at no running nvidia-cuda-mps-control"},
	{806, "CUDA_ERROR_MPS_RPC_FAILURE", "the MPS server's RPC failed", ""},
	{807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "the MPS server is not ready", ""},
	{808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "the MPS server has as many clients as it allows", ""},
	{909, "CUDA_ERROR_TIMEOUT", "the operation timed out", ""},
	{999, "CUDA_ERROR_UNKNOWN", "an unknown internal error", "often a driver/library mismatch or a GPU in a bad state; the host's kernel log (Xid) says more"},
}

// NVMLResults are nvmlReturn_t values (enum nvmlReturn_enum in nvml.h).
var NVMLResults = []ResultCode{
	{0, "NVML_SUCCESS", "no error", ""},
	{1, "NVML_ERROR_UNINITIALIZED", "NVML was not initialized", "an earlier nvmlInit_v2 failed"},
	{2, "NVML_ERROR_INVALID_ARGUMENT", "an argument was invalid", "a probe bug"},
	{3, "NVML_ERROR_NOT_SUPPORTED", "the device does not support the request", ""},
	{4, "NVML_ERROR_NO_PERMISSION", "the caller may not perform the request", "the node's mode or owner keeps this user from /dev/nvidiactl or /dev/nvidiaN"},
	{5, "NVML_ERROR_ALREADY_INITIALIZED", "deprecated: multiple initializations are allowed", ""},
	{6, "NVML_ERROR_NOT_FOUND", "a queried object was not found", ""},
	{7, "NVML_ERROR_INSUFFICIENT_SIZE", "an input buffer was too small", ""},
	{8, "NVML_ERROR_INSUFFICIENT_POWER", "a device's external power cables are not properly attached", "hardware"},
	{9, "NVML_ERROR_DRIVER_NOT_LOADED", "the NVIDIA kernel driver is not loaded", "no nvidia module on the host, or /dev/nvidiactl is missing from the container"},
	{10, "NVML_ERROR_TIMEOUT", "the call timed out", ""},
	{11, "NVML_ERROR_IRQ_ISSUE", "the kernel driver detected an interrupt problem with a GPU", "hardware or platform (MSI) configuration"},
	{12, "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML could not find or load a library it needs", ""},
	{13, "NVML_ERROR_FUNCTION_NOT_FOUND", "this NVML does not implement the function", "an older libnvidia-ml.so.1 than the caller expects"},
	{14, "NVML_ERROR_CORRUPTED_INFOROM", "the GPU's infoROM is corrupted", "hardware"},
	{15, "NVML_ERROR_GPU_IS_LOST", "the GPU fell off the bus or is otherwise inaccessible", "a hardware or PCIe fault (Xid 79 in the host's kernel log)"},
	{16, "NVML_ERROR_RESET_REQUIRED", "the GPU needs a reset before it can be used", ""},
	{17, "NVML_ERROR_OPERATING_SYSTEM", "the GPU control device was blocked by the operating system or cgroups", "the device cgroup denies /dev/nvidiactl or a /dev/nvidiaN the process holds, typically after systemctl daemon-reload re-applied a unit's device policy behind the runtime's back (the cgroup layer's drift check); the node probes above say which"},
	{18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "the library and the kernel driver (RM) are of different versions", "the container's libnvidia-ml.so.1 is from another driver release than the host's module"},
	{19, "NVML_ERROR_IN_USE", "the GPU is in use", ""},
	{20, "NVML_ERROR_MEMORY", "insufficient memory", ""},
	{21, "NVML_ERROR_NO_DATA", "no data", ""},
	{22, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", "the vGPU operation is not available because ECC is enabled", ""},
	{23, "NVML_ERROR_INSUFFICIENT_RESOURCES", "ran out of critical resources other than memory", ""},
	{24, "NVML_ERROR_FREQ_NOT_SUPPORTED", "the frequency is not supported", ""},
	{25, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "a versioned argument has an unsupported version", ""},
	{26, "NVML_ERROR_DEPRECATED", "the function is deprecated", ""},
	{27, "NVML_ERROR_NOT_READY", "the system is not ready for the request", ""},
	{28, "NVML_ERROR_GPU_NOT_FOUND", "no GPU was found", ""},
	{29, "NVML_ERROR_INVALID_STATE", "the resource is in an invalid state for the request", ""},
	{999, "NVML_ERROR_UNKNOWN", "an internal driver error", "the classic \"Failed to initialize NVML: Unknown Error\" in a container that lost access to its nodes after a daemon-reload (see the cgroup drift check)"},
}

// LookupResult finds a code in a table; an unknown one gets a name that
// says so.
func LookupResult(table []ResultCode, code int, enum string) ResultCode {
	for _, c := range table {
		if c.Code == code {
			return c
		}
	}
	return ResultCode{Code: code, Name: fmt.Sprintf("%s %d", enum, code), Meaning: "a value this probe's table does not hold"}
}
