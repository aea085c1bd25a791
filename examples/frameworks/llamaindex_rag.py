import json
from pathlib import Path

from llama_index.core.schema import TextNode
from llama_index.retrievers.bm25 import BM25Retriever

passages = [json.loads(line) for line in Path(__file__).with_name("corpus.jsonl").open(encoding="utf-8")]
nodes = [TextNode(id_=p["id"], text=p["text"]) for p in passages]
bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=len(nodes))


def retrieve(question, k):  # target.python.retriever: the NodeWithScore list as LlamaIndex gives it
    return bm25.retrieve(question)[:k]  # k per call: the shared retriever is not changed


def answer(question, nodes):  # target.python.answerer: the first sentence of the top passage
    return nodes[0].node.get_content().split(". ")[0] if nodes else ""
