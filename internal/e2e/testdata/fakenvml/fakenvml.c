// fakenvml: a stand-in for the NVIDIA driver's libnvidia-ml.so.1, for
// berth agent on a machine without GPUs (the nomad-dev kit). It serves the
// NVML functions go-nvml's Init path and berth agent call, and nothing
// else: a call to any other function fails as it would against a driver
// that lacks it (go-nvml resolves symbols lazily; an unresolved one ends
// the process), so a new NVML call in the agent shows up in TestRealPackAgent.
//
// The GPUs come from the file FAKE_NVML_GPUS names, read by nvmlInit_v2,
// one GPU a line in NVML index order:
//
//	UUID BUS_ID MEMORY_MIB NUMA PEERS MODEL...
//
// BUS_ID is NVML's "00000000:18:00.0"; NUMA is a node number or "-"
// (unknown: nvmlDeviceGetNumaNodeId answers NOT_SUPPORTED); PEERS lists
// the indexes of the GPUs this one has NVLink to, joined by ",", or "-"
// (the relation is made symmetric); MODEL is the rest of the line. Lines
// that start with # are comments. Without FAKE_NVML_GPUS, or when its file
// cannot be read, nvmlInit_v2 answers NVML_ERROR_DRIVER_NOT_LOADED, as
// NVML does on a node whose kernel driver is not loaded.
//
// No MIG functions: go-nvml's callers see a library older than MIG.
//
//	cc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o DIR/libnvidia-ml.so.1 fakenvml.c

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_UNKNOWN = 999,
};

// As nvml.h lays them out.
typedef struct {
	char busIdLegacy[16];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;
	unsigned int pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

typedef struct {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

enum { NVML_P2P_CAPS_INDEX_NVLINK = 2 };
enum { NVML_P2P_STATUS_OK = 0, NVML_P2P_STATUS_NOT_SUPPORTED = 5 };

#define MAX_GPUS 64

struct gpu {
	char uuid[96];
	char model[96];
	char busId[32];
	unsigned int domain, bus, device, function;
	unsigned long long mib;
	int numa; // -1: unknown
	unsigned long long peers; // bit j: NVLink to GPU j
};

typedef struct gpu *nvmlDevice_t;

static struct gpu gpus[MAX_GPUS];
static unsigned int ngpus;
static int initialized;

// load reads the GPU file; it returns an NVML error code.
static nvmlReturn_t load(void) {
	const char *path = getenv("FAKE_NVML_GPUS");
	if (path == NULL || *path == '\0')
		return NVML_ERROR_DRIVER_NOT_LOADED;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return NVML_ERROR_DRIVER_NOT_LOADED;
	char line[512];
	nvmlReturn_t ret = NVML_SUCCESS;
	ngpus = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '#' || line[strspn(line, " \t")] == '\0')
			continue;
		if (ngpus == MAX_GPUS) {
			ret = NVML_ERROR_UNKNOWN;
			break;
		}
		struct gpu *g = &gpus[ngpus];
		memset(g, 0, sizeof *g);
		char numa[16], peers[256];
		int rest = -1;
		if (sscanf(line, "%95s %31s %llu %15s %255s %n", g->uuid, g->busId, &g->mib, numa, peers, &rest) != 5 || rest < 0 ||
		    sscanf(g->busId, "%x:%x:%x.%x", &g->domain, &g->bus, &g->device, &g->function) != 4) {
			ret = NVML_ERROR_UNKNOWN;
			break;
		}
		snprintf(g->model, sizeof g->model, "%s", line + rest);
		g->numa = strcmp(numa, "-") == 0 ? -1 : atoi(numa);
		if (strcmp(peers, "-") != 0) {
			for (char *p = strtok(peers, ","); p != NULL; p = strtok(NULL, ",")) {
				int j = atoi(p);
				if (j < 0 || j >= MAX_GPUS) {
					ret = NVML_ERROR_UNKNOWN;
					break;
				}
				g->peers |= 1ULL << j;
			}
		}
		if (ret != NVML_SUCCESS)
			break;
		ngpus++;
	}
	fclose(f);
	for (unsigned int i = 0; i < ngpus; i++) // symmetric, and only to GPUs that exist
		for (unsigned int j = 0; j < MAX_GPUS; j++)
			if (gpus[i].peers & (1ULL << j)) {
				if (j >= ngpus)
					return NVML_ERROR_UNKNOWN;
				gpus[j].peers |= 1ULL << i;
			}
	return ret;
}

static int valid(nvmlDevice_t d) { return d >= gpus && d < gpus + ngpus; }

// copy puts s into buf of length n, as NVML's string getters do.
static nvmlReturn_t copy(const char *s, char *buf, unsigned int n) {
	if (buf == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (strlen(s) + 1 > n)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, strlen(s) + 1);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
	nvmlReturn_t ret = load();
	initialized = ret == NVML_SUCCESS;
	return ret;
}

nvmlReturn_t nvmlShutdown(void) {
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	initialized = 0;
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t ret) {
	switch (ret) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_UNINITIALIZED:
		return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED:
		return "Driver Not Loaded";
	}
	return "Unknown Error";
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (count == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = ngpus;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (device == NULL || index >= ngpus)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &gpus[index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!valid(d))
		return NVML_ERROR_INVALID_ARGUMENT;
	return copy(d->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!valid(d))
		return NVML_ERROR_INVALID_ARGUMENT;
	return copy(d->model, name, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *memory) {
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!valid(d) || memory == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	memory->total = d->mib << 20;
	memory->free = memory->total;
	memory->used = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!valid(d) || pci == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	memset(pci, 0, sizeof *pci);
	snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", d->domain, d->bus, d->device);
	snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.%X", d->domain, d->bus, d->device, d->function);
	pci->domain = d->domain;
	pci->bus = d->bus;
	pci->device = d->device;
	pci->pciDeviceId = 0x233010DE; // NVIDIA H100 SXM5
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t d, unsigned int *node) {
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!valid(d) || node == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (d->numa < 0)
		return NVML_ERROR_NOT_SUPPORTED;
	*node = (unsigned int)d->numa;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t d1, nvmlDevice_t d2, int caps, int *status) {
	if (!initialized)
		return NVML_ERROR_UNINITIALIZED;
	if (!valid(d1) || !valid(d2) || status == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*status = NVML_P2P_STATUS_NOT_SUPPORTED;
	if (caps == NVML_P2P_CAPS_INDEX_NVLINK && d1 != d2 && (d1->peers & (1ULL << (d2 - gpus))))
		*status = NVML_P2P_STATUS_OK;
	return NVML_SUCCESS;
}
