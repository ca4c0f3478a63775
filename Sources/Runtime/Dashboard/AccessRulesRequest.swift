import Foundation
import TrackerLogic

/// The bodies of `POST /api/access/rules` (`{"rule": "allow" | "deny" | "remove",
/// "infoHashes": [40 hex digits, …]}`) and `POST /api/access/clients` (`{"rule": …,
/// "prefixes": ["-UT355-", "0x2d5554", …]}`, `ClientPrefix`), as the catalogue change
/// each asks for. Anything else (another rule, a name that does not parse, none, more than
/// one change may carry) is nil: the API answers 400 and nothing is submitted.
public enum AccessRulesRequest {
    public static func change(_ body: Data) -> CatalogueChange? {
        guard let (rule, hashes) = decode(body, key: "infoHashes", InfoHash.init(hex:)) else { return nil }
        return rule.map { .setAccessRule($0, hashes) } ?? .removeAccessRules(hashes)
    }

    public static func clientChange(_ body: Data) -> CatalogueChange? {
        guard let (rule, prefixes) = decode(body, key: "prefixes", ClientPrefix.init) else { return nil }
        return rule.map { .setClientRule($0, prefixes) } ?? .removeClientRules(prefixes)
    }

    /// The rule (nil: `remove`) and every name under `key`, each parsed.
    static func decode<T>(_ body: Data, key: String, _ parse: (String) -> T?) -> (AccessRule?, [T])? {
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
              let ruleText = object["rule"] as? String, let texts = object[key] as? [String],
              (1...AccessPolicy.maxHashesPerChange).contains(texts.count) else { return nil }
        let names = texts.compactMap(parse)
        guard names.count == texts.count else { return nil }
        switch ruleText {
        case "allow": return (.allow, names)
        case "deny": return (.deny, names)
        case "remove": return (nil, names)
        default: return nil
        }
    }
}
