"""Test oracle only: the released MQuAKE-Remastered text rules, copied from
henryzhongsc/MQuAKE-Remastered `eval/mquake_remastered/mquake_utils.py` (CC BY 4.0) with
their bodies unchanged; `extract_entity_after_call` is the release's `extract_entity` for
one question with the model call taken out (its `output` is what `call_model` returned:
prompt plus generation, stripped). The ports in arms/released.py and arms/gwalk.py are
re-implementations; tests compare them with these on the same inputs."""
# ruff: noqa
from __future__ import annotations


def remove_extra_target_occurrences(gen, target, count):
    occurrences = gen.count(target)

    if occurrences <= count:
        return gen

    index = 0
    for _ in range(count + 1):
        index = gen.find(target, index) + len(target)

    return gen[:index - len(target) - 2]


def able_to_quit(gen, task_prompt):
    # The prompt contains 4 shots + 1 evaluation example -> 5.
    if gen.count('Final answer: ') >= 5:
        index = gen.find('Final answer: ', len(task_prompt) + 13)
        ans = gen[index:]
        ans = ans.strip().split('\n')[0][len('Final answer: '):]
        if len(ans) > 0 and ans[-1] == '.':
            ans = ans[:-1]
        return True, ans
    else:
        return False, None


def extract_entities(input_string):
    segments = input_string.split('->')

    entities = []

    for segment in segments:
        if '(' in segment and ')' in segment:
            entity = segment.strip()[1:-1]
            entities.append(entity)

    return entities


def extract_entity_after_call(output, question):
    output = output.strip().split('\n\n')[4]
    output = output.strip().split('\n')[-1][len("Extracted entity: ("):]
    entity = output[:-1].strip()

    if entity in question:
        entity_start_idx = question.find(entity)
        entity_end_idx = entity_start_idx + len(entity) - 1

        while entity_end_idx + 1 < len(question):
            next_char = question[entity_end_idx + 1]

            if next_char == '.' and entity_end_idx + 2 < len(question):
                next_space_idx = question.find(" ", entity_end_idx + 3)
                if next_space_idx == -1:
                    entity_end_idx = len(question) - 1
                else:
                    entity_end_idx = next_space_idx - 1
            else:
                break

        full_entity = question[entity_start_idx: entity_end_idx + 1].split("'")[0].replace('?', '')
        if full_entity in question:
            return full_entity

    return entity
