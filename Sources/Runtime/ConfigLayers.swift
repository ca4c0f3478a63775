import Foundation
import TOMLKit

/// The layers a node's settings come from, lowest first: the config file, every `*.toml`
/// of `FILE.d/` in name order, then `TRACKER_<KEY>` environment variables. A key in a
/// later layer replaces the earlier value whole (a list too; an empty list or `false`
/// unsets it). The command line, above them all, is the caller's: `run` parses the
/// layers' arguments placed before its own.
///
/// Keys are `run`'s long option names without the dashes; each value becomes `run`
/// arguments (`--key value`, `--key` for a true flag, one `--key value` per list item),
/// so one parser checks every layer and its messages name keys.
public struct ConfigLayers: Sendable {
    /// One key as the layers left it: its `run` arguments and the layer that set it.
    public struct Setting: Equatable, Sendable {
        public var arguments: [String]
        /// A file's path, or `environment TRACKER_KEY`.
        public var source: String

        public init(arguments: [String], source: String) { self.arguments = arguments; self.source = source }
    }

    public struct Problem: Error, CustomStringConvertible, Equatable {
        public var description: String

        public init(description: String) { self.description = description }
    }

    /// `run`'s keys: which `TRACKER_…` variables are settings.
    public var keys: [String]
    /// Reads a layer's file (a test gives texts of its own).
    public var read: @Sendable (String) -> String?
    /// Lists a drop-in directory's entries (nil when it does not exist).
    public var list: @Sendable (String) -> [String]?

    public init(keys: [String], read: @escaping @Sendable (String) -> String? = { try? String(contentsOfFile: $0, encoding: .utf8) },
                list: @escaping @Sendable (String) -> [String]? = { try? FileManager.default.contentsOfDirectory(atPath: $0) }) {
        self.keys = keys; self.read = read; self.list = list
    }

    public static func dropInDirectory(of path: String) -> String { path + ".d" }

    /// The files `--config path` reads, in order: the file, then its drop-ins.
    public func files(of path: String) -> [String] {
        let directory = Self.dropInDirectory(of: path)
        let names = list(directory) ?? []
        return [path] + names.filter { $0.hasSuffix(".toml") && !$0.hasPrefix(".") }.sorted().map { "\(directory)/\($0)" }
    }

    /// `TRACKER_NUMWANT_MAX` for `numwant-max`.
    public static func variable(for key: String) -> String {
        "TRACKER_" + key.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// The settings of `path` (nil: no file), its drop-ins and `environment`, by key.
    /// `substitute` reads another file in place of one layer (or adds it as the last
    /// drop-in): what a save would leave, checked before it is written.
    public func settings(path: String?, environment: [String: String],
                         replacing substitute: (file: String, with: String)? = nil) throws(Problem) -> [String: Setting] {
        var out: [String: Setting] = [:]
        var layers = path.map(files(of:)) ?? []
        if let substitute, !layers.contains(substitute.file) { layers.append(substitute.file) }
        for file in layers {
            let source = substitute?.file == file ? substitute?.with ?? file : file
            guard let text = read(source) else { throw Problem(description: "config \(file): cannot read it") }
            for (key, arguments) in try Self.table(text, named: file) { out[key] = Setting(arguments: arguments, source: file) }
        }
        for key in keys {
            let name = Self.variable(for: key)
            guard let text = environment[name] else { continue }
            let source = "environment \(name)"
            // As TOML when it reads as a value (a list, a number, true), else a string.
            let value: any TOMLValueConvertible = (try? TOMLTable(string: "v = \(text)"))?["v"] ?? text
            do { out[key] = Setting(arguments: try Self.arguments(key, value), source: source) } catch {
                throw Problem(description: "config \(source): \(error.description)")
            }
        }
        return out
    }

    /// One TOML text's settings as `run` arguments, by key (`named`: how messages name it).
    static func table(_ text: String, named name: String) throws(Problem) -> [String: [String]] {
        let table: TOMLTable
        do { table = try TOMLTable(string: text) } catch let e as TOMLParseError {
            throw Problem(description: "config \(name): line \(e.source.begin.line): \(e.description)")
        } catch { throw Problem(description: "config \(name): \(error)") }
        var out: [String: [String]] = [:]
        for key in table.keys {
            guard let value = table[key] else { continue }
            guard key != "config" else { throw Problem(description: "config \(name): key 'config' cannot name another file") }
            do { out[key] = try arguments(key, value) } catch { throw Problem(description: "config \(name): \(error.description)") }
        }
        return out
    }

    /// A value as `run` arguments: a flag's `--key` when true, `--key value`, or one
    /// `--key value` per item of a list (an empty list: the key unset).
    static func arguments(_ key: String, _ value: any TOMLValueConvertible) throws(Problem) -> [String] {
        switch value.type {
        case .bool:
            return value.bool == true ? ["--\(key)"] : []
        case .int, .double, .string:
            return ["--\(key)", value.int.map(String.init) ?? value.double.map { "\($0)" } ?? value.string ?? ""]
        case .array:
            guard let items = value.array, items.allSatisfy({ $0.type == .string || $0.type == .int }) else {
                throw Problem(description: "key '\(key)': a list may hold only strings or numbers")
            }
            return items.flatMap { ["--\(key)", $0.string ?? $0.int.map(String.init) ?? ""] }
        default:
            throw Problem(description: "key '\(key)': a \(value.type) is not a setting (use a string, number, true/false or a list)")
        }
    }
}
