/** The Feishu / Lark channel's id (its definition's), which is its channel id and namespaces its keys. It keeps no keys of its own. */
export const FEISHU_PLUGIN_ID = 'feishu';
