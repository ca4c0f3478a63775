import Foundation

/// Files the node writes for the operator (a config save, a generated admin token): never
/// through a name an attacker could have planted, never half written.
public enum AtomicFile {
    public struct WriteError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Writes `contents` to a temporary file created exclusively (`mkstemp`: never an
    /// existing name or link) in `path`'s directory, with `mode` and `owner` (nil: ours),
    /// synced and checked by `validate`, then renamed over `path` — which then holds the old
    /// contents or the new, never a mix. A link at `path` itself is replaced, not followed.
    public static func write(_ path: String, _ contents: String, mode: mode_t, owner: (uid_t, gid_t)? = nil,
                             validate: (String) throws -> Void = { _ in }) throws {
        let url = URL(fileURLWithPath: path)
        var template = Array(url.deletingLastPathComponent().appendingPathComponent(".\(url.lastPathComponent).XXXXXX").path.utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.map { mkstemp($0) } ?? -1 }
        guard fd >= 0 else { throw WriteError(description: "\(path): cannot create a file beside it (errno \(errno))") }
        let temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do {
            defer { close(fd) }
            // Owner first: fchown may clear set-id bits that fchmod then restores. Only root
            // may give a file away; the mode stays as tight either way.
            if let (uid, gid) = owner { _ = fchown(fd, uid, gid) }
            guard fchmod(fd, mode) == 0 else { throw WriteError(description: "\(path): cannot set its mode (errno \(errno))") }
            let bytes = Array(contents.utf8)
            var written = 0
            while written < bytes.count {
                let n = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                guard n > 0 else { throw WriteError(description: "\(path): cannot write it (errno \(errno))") }
                written += n
            }
            guard fsync(fd) == 0 else { throw WriteError(description: "\(path): cannot sync it (errno \(errno))") }
        }
        try validate(temporary)
        guard rename(temporary, path) == 0 else { throw WriteError(description: "\(path): cannot replace it (errno \(errno))") }
        renamed = true
    }
}
