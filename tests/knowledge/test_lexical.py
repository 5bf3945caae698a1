"""Lexical text preparation, checked against PostgreSQL's own full text search."""

import pytest
from django.db import connection

from knowledge.lexical import (
    MAX_QUERY_TERMS,
    document_tsvector_sql_params,
    lexical_document,
    lexical_query,
    or_tsquery_sql_params,
)

HOSTILE_TERMS = [
    "it's",
    "a'b''c",
    "&|!():*",
    "refund:*",
    "\\",
    "back\\slash\\'",
    "'); DROP TABLE django_migrations; --",
    "!refund & (zebra | 'x')",
    "<->",
    "%s %(name)s",
]


def _matches(document, *, query=None, terms=None):
    tsvector_sql, tsvector_params = document_tsvector_sql_params(document)
    tsquery_sql, tsquery_params = or_tsquery_sql_params(lexical_query(query) if terms is None else terms)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {tsvector_sql} @@ {tsquery_sql}", [*tsvector_params, *tsquery_params])
        return cursor.fetchone()[0]


def _raw(sql, params):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


# --------------------------------------------------------------------------------------------------
# Pure preparation
# --------------------------------------------------------------------------------------------------


def test_document_preparation_segments_han_runs_and_leaves_other_text():
    prepared = lexical_document("本公司的退款政策如下。Refunds take 14 days; iPhone15退款")
    words = prepared.split()
    assert {"退款", "政策", "公司"} <= set(words)
    assert "Refunds take 14 days;" in prepared
    assert "iPhone15" in words  # set apart from the Han word that followed it


def test_document_preparation_adds_the_words_inside_compounds():
    words = lexical_document("中华人民共和国").split()
    assert {"中华人民共和国", "共和国", "人民"} <= set(words)


def test_query_terms_are_segmented_deduplicated_and_stripped_of_function_words():
    assert lexical_query("退款政策是什么？") == ["退款", "政策"]
    assert lexical_query("Refund refund REFUND, e-mail 3.14 refund/return") == [
        "Refund",
        "e-mail",
        "3.14",
        "return",
    ]
    assert lexical_query("  ?!  ") == []
    assert lexical_query("x" * 65 + " kept") == ["kept"]


def test_query_terms_are_capped():
    terms = lexical_query(" ".join(f"word{n}" for n in range(100)))
    assert len(terms) == MAX_QUERY_TERMS
    assert terms[0] == "word0"


def test_or_tsquery_sql_holds_only_placeholders():
    sql, params = or_tsquery_sql_params(HOSTILE_TERMS)
    assert sql == "(" + " || ".join(["plainto_tsquery(%s::regconfig, %s)"] * len(HOSTILE_TERMS)) + ")"
    assert params[1::2] == HOSTILE_TERMS
    assert set(params[0::2]) == {"english"}
    assert or_tsquery_sql_params([]) == ("''::tsquery", [])


def test_or_tsquery_rejects_bad_input():
    with pytest.raises(TypeError):
        or_tsquery_sql_params("refund")
    with pytest.raises(TypeError):
        or_tsquery_sql_params(["refund", 3])
    with pytest.raises(ValueError):
        or_tsquery_sql_params(["t"] * (MAX_QUERY_TERMS + 1))


# --------------------------------------------------------------------------------------------------
# Against PostgreSQL
# --------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_english_words_are_stemmed_by_postgresql():
    assert _matches("We issue a refund within 14 days.", query="refunds")
    assert _matches("Refunds are processed weekly.", query="refund")
    assert _matches("Our policies changed.", query="policy")
    assert not _matches("We issue a refund within 14 days.", query="zebra")


@pytest.mark.django_db
def test_chinese_query_finds_a_chinese_document():
    document = "本公司的退款政策如下：收到商品后七天内可以申请退款。"
    assert _matches(document, query="退款政策")
    assert _matches(document, query="怎么申请退款？")
    assert not _matches(document, query="发票")
    # Without segmentation PostgreSQL indexes the whole Han run as one lexeme and misses the word.
    assert not _raw("SELECT to_tsvector('english', %s) @@ plainto_tsquery('english', %s)", [document, "退款"])


@pytest.mark.django_db
def test_chinese_query_for_part_of_a_compound_matches():
    assert _matches("中华人民共和国的法律适用于本合同。", query="共和国")


@pytest.mark.django_db
def test_mixed_chinese_and_english_text():
    document = "iPhone15退款 requires the original order number and 发票."
    assert _matches(document, query="iphone15")
    assert _matches(document, query="退款")
    assert _matches(document, query="orders")
    assert _matches(document, query="发票 invoice")
    assert not _matches(document, query="shipping 运费")


@pytest.mark.django_db
def test_any_matching_term_is_enough():
    document = "Refunds are processed within fourteen days."
    assert _matches(document, query="refund zebra giraffe")
    # The AND of a whole question, which this module avoids, misses the same document.
    assert not _raw(
        "SELECT to_tsvector('english', %s) @@ plainto_tsquery('english', %s)",
        [document, "refund zebra giraffe"],
    )


@pytest.mark.django_db
def test_stop_words_and_empty_queries_match_nothing_without_error():
    document = "The refund of the order."
    assert not _matches(document, query="the of and")
    assert not _matches(document, terms=[])
    assert not _matches(document, query="")


@pytest.mark.django_db
def test_hostile_terms_are_data_not_syntax():
    document = "Refunds are processed within fourteen days; it's free."
    assert _matches(document, terms=HOSTILE_TERMS)  # "refund:*", "!refund & …" still mean the word refund
    assert not _matches(document, terms=["&|!():*", "\\", "'); DROP TABLE django_migrations; --", "<->"])
    assert _matches(document, query="'); DROP TABLE x; -- refund:* \\ & | ! ( ) \" %s")
    assert _raw("SELECT count(*) FROM django_migrations", []) > 0


@pytest.mark.django_db
def test_ranking_prefers_the_document_with_more_matching_terms():
    query_sql, query_params = or_tsquery_sql_params(lexical_query("退款政策"))
    documents = ["退款流程很简单。", "退款政策写在这里。", "发货时间为三天。"]
    rows = []
    for document in documents:
        vector_sql, vector_params = document_tsvector_sql_params(document)
        rows.append(_raw(f"SELECT ts_rank({vector_sql}, {query_sql})", [*vector_params, *query_params]))
    assert rows[1] > rows[0] > rows[2] == 0
