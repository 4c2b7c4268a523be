package deepinfer

// #include "helpers.h"
import "C"

// HeaderVersion is the version of deepinfer.h this package was compiled against.
const HeaderVersion = "0.2.0"

// headerVersionNumber and headerABI come from the header itself (checked against the constant
// above by a test).
const (
	headerVersionNumber = uint32(C.DI_VERSION_MAJOR<<16 | C.DI_VERSION_MINOR<<8 | C.DI_VERSION_PATCH)
	headerABI           = uint32(C.DI_ABI_VERSION)
)

// Version is the version of the loaded library, "MAJOR.MINOR.PATCH". The package's own version
// is the library's.
func Version() string { return C.GoString(C.di_version()) }

// VersionNumber is the loaded library's version as MAJOR<<16 | MINOR<<8 | PATCH.
func VersionNumber() uint32 { return uint32(C.di_version_number()) }

// ABIVersion is the ABI version of the loaded library (the number of libdeepinfer.so.N).
func ABIVersion() uint32 { return uint32(C.di_abi_version()) }

// versionErr is what every constructor returns when the loaded library does not fit the header
// this package was built with; nil when it does.
var versionErr = checkVersion(ABIVersion(), VersionNumber(), Version())

// checkVersion: the ABI must match exactly, and the library must be at least as new as the
// header within it (an older one lacks functions this package calls).
func checkVersion(abi, number uint32, version string) error {
	if abi != headerABI {
		return newError(CodeUnsupported,
			"the loaded libdeepinfer %s has ABI %d but this Go package was built for ABI %d (deepinfer.h %s): "+
				"rebuild the package against the installed library, or install libdeepinfer.so.%d",
			version, abi, headerABI, HeaderVersion, headerABI)
	}
	if number < headerVersionNumber {
		return newError(CodeUnsupported,
			"the loaded libdeepinfer %s is older than deepinfer.h %s that this Go package was built with: "+
				"install libdeepinfer %s or later", version, HeaderVersion, HeaderVersion)
	}
	return nil
}

// CheckVersion reports whether the loaded library can serve this package: nil, or an error
// (errors.Is(err, ErrUnsupported)) saying which versions disagree. Open and the other
// constructors return the same error.
func CheckVersion() error { return versionErr }
