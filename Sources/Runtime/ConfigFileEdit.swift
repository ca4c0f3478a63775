import Foundation

/// Edits of a flat TOML config file made from the dashboard, and how they reach the disk.
///
/// The file is the operator's: a save changes the values of the keys edited and nothing
/// else (comments, order, blank lines and the other values stay byte for byte), keeps the
/// file's mode and owner, and writes through no link an attacker could plant beside it.
public enum ConfigFileEdit {
    /// `text` with each `key = value` line of `changes` rewritten in place (a comment
    /// after the value is kept); keys the file does not set yet are appended. A value
    /// reading `true`/`false` or an integer is written bare, anything else as a string.
    public static func apply(_ changes: [String: String], to text: String) -> String {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var missing: [(String, String)] = []
        for (key, value) in changes.sorted(by: { $0.key < $1.key }) {
            let rendered = render(value)
            if let i = lines.firstIndex(where: { assignment(in: $0, of: key) != nil }), let a = assignment(in: lines[i], of: key) {
                lines[i] = String(lines[i][..<a.valueStart]) + rendered + String(lines[i][a.valueEnd...])
            } else {
                missing.append((key, rendered))
            }
        }
        if !missing.isEmpty {
            if let last = lines.last, last.isEmpty { lines.removeLast() }
            lines += missing.map { "\($0.0) = \($0.1)" }
            lines.append("")
        }
        return lines.joined(separator: "\n")
    }

    /// Where the value of `key = value` sits in `line`, if the line assigns `key`.
    static func assignment(in line: String, of key: String) -> (valueStart: String.Index, valueEnd: String.Index)? {
        var i = line.startIndex
        while i < line.endIndex, line[i] == " " || line[i] == "\t" { i = line.index(after: i) }
        guard line[i...].hasPrefix(key) else { return nil }
        i = line.index(i, offsetBy: key.count)
        while i < line.endIndex, line[i] == " " || line[i] == "\t" { i = line.index(after: i) }
        guard i < line.endIndex, line[i] == "=" else { return nil }
        i = line.index(after: i)
        while i < line.endIndex, line[i] == " " || line[i] == "\t" { i = line.index(after: i) }
        let start = i
        if i < line.endIndex, line[i] == "\"" {
            // A basic string: up to the closing quote not escaped.
            i = line.index(after: i)
            while i < line.endIndex, line[i] != "\"" {
                if line[i] == "\\" { i = line.index(after: i); if i == line.endIndex { break } }
                i = line.index(after: i)
            }
            if i < line.endIndex { i = line.index(after: i) }
        } else {
            while i < line.endIndex, line[i] != "#" { i = line.index(after: i) }
            // Keep the spaces before a comment with the comment.
            while i > start, line[line.index(before: i)] == " " || line[line.index(before: i)] == "\t" { i = line.index(before: i) }
        }
        return (start, i)
    }

    static func render(_ value: String) -> String {
        let v = value.trimmingCharacters(in: .whitespaces)
        if v == "true" || v == "false" || (Int(v) != nil && !v.hasPrefix("+")) { return v }
        var out = "\""
        for scalar in v.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += String(format: "\\u%04X", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// Replaces the config file at `path` with `contents` (`AtomicFile.write`), keeping
    /// the old file's mode and owner; `validate` checks the written candidate first.
    public static func replace(_ path: String, with contents: String, validate: (String) throws -> Void) throws {
        var old = stat()
        guard stat(path, &old) == 0 else { throw AtomicFile.WriteError(description: "config \(path): cannot read it (errno \(errno))") }
        try AtomicFile.write(path, contents, mode: old.st_mode & 0o7777, owner: (old.st_uid, old.st_gid), validate: validate)
    }
}
