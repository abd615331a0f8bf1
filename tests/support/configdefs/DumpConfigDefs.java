// Prints the ConfigDef of each class named on the command line as one JSON document on stdout:
// {"<class>": {"source": "<jar file>", "keys": [{"name", "type", "default", "required", "importance", "doc",
// "group", "internal", "valid"}]}}. Run by tests/support/dump_configdefs.py (java source-file mode, no build step).
//
// The ConfigDef is found as Kafka Connect finds it: a public static configDef() (ConnectorConfig and its sink and
// source variants), a static ConfigDef field (StandaloneConfig's CONFIG), a static ConfigDef factory of one argument
// (DistributedConfig's config(Crypto), given Crypto.SYSTEM), or config() of a new instance (connectors, transformations, predicates, converters).
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;

public class DumpConfigDefs {
    public static void main(String[] args) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        for (String name : args) {
            Class<?> type = Class.forName(name);
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("source", String.valueOf(type.getProtectionDomain().getCodeSource().getLocation()));
            entry.put("keys", keys(configDef(type)));
            out.put(name, entry);
        }
        new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValue(System.out, out);
    }

    static ConfigDef configDef(Class<?> type) throws Exception {
        try {
            Method m = type.getMethod("configDef");
            if (Modifier.isStatic(m.getModifiers()) && m.getParameterCount() == 0) {
                return (ConfigDef) m.invoke(null);
            }
        } catch (NoSuchMethodException e) {
            // not a config class with a public definition
        }
        for (Field f : type.getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers()) && ConfigDef.class.isAssignableFrom(f.getType())) {
                f.setAccessible(true);
                return (ConfigDef) f.get(null);
            }
        }
        for (Method m : type.getDeclaredMethods()) {
            // DistributedConfig builds its definition in config(Crypto): pass the parameter type's own instance
            if (Modifier.isStatic(m.getModifiers()) && m.getReturnType() == ConfigDef.class
                    && m.getParameterCount() == 1) {
                Class<?> param = m.getParameterTypes()[0];
                for (Field f : param.getDeclaredFields()) {
                    if (Modifier.isStatic(f.getModifiers()) && param.isAssignableFrom(f.getType())) {
                        f.setAccessible(true);
                        m.setAccessible(true);
                        return (ConfigDef) m.invoke(null, f.get(null));
                    }
                }
            }
        }
        Object instance = type.getDeclaredConstructor().newInstance();
        return (ConfigDef) type.getMethod("config").invoke(instance);
    }

    static List<Map<String, Object>> keys(ConfigDef def) {
        List<Map<String, Object>> keys = new ArrayList<>();
        for (ConfigDef.ConfigKey key : def.configKeys().values()) {
            Map<String, Object> k = new LinkedHashMap<>();
            k.put("name", key.name);
            k.put("type", key.type.name());
            boolean required = key.defaultValue == ConfigDef.NO_DEFAULT_VALUE;
            k.put("required", required);
            k.put("default", required || key.defaultValue == null ? null
                    : ConfigDef.convertToString(key.defaultValue, key.type));
            k.put("importance", key.importance == null ? null : key.importance.name());
            String doc = key.documentation == null ? "" : key.documentation.strip();
            int end = doc.indexOf(". ");
            k.put("doc", (end < 0 ? doc : doc.substring(0, end + 1)).replaceAll("\\s+", " "));
            k.put("group", key.group);
            k.put("internal", key.internalConfig);
            String valid = key.validator == null ? null : key.validator.toString();
            // a validator without its own toString (a lambda) prints its identity, which differs between runs
            k.put("valid", valid == null || valid.contains("$$Lambda") || valid.matches("[\\w.$]+@[0-9a-f]+")
                    ? null : valid);
            keys.add(k);
        }
        return keys;
    }
}
