#if canImport(Glibc)
import Glibc
#endif

/// What a node checks about the interface it joins its group on before it binds
/// anything, so that a node given a wrong or down interface says so at start instead of
/// hearing nothing and reporting nothing.
public enum NetworkInterface {
    /// nil when the interface exists, is up and has an IPv4 address; otherwise a
    /// sentence that names it.
    public static func problem(named name: String) -> String? {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return "cannot list the host's interfaces" }
        defer { freeifaddrs(list) }
        var seen = false, up = false, ipv4 = false
        var names = Set<String>()
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            let entryName = String(cString: entry.pointee.ifa_name)
            names.insert(entryName)
            if entryName == name {
                seen = true
                if entry.pointee.ifa_flags & UInt32(IFF_UP) != 0 { up = true }
                if let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) { ipv4 = true }
            }
            cursor = entry.pointee.ifa_next
        }
        if !seen { return "no interface named '\(name)' on this host (have: \(names.sorted().joined(separator: ", ")))" }
        if !up { return "interface '\(name)' is down" }
        if !ipv4 { return "interface '\(name)' has no IPv4 address" }
        return nil
    }
}
